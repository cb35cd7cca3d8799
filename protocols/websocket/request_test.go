package websocket

import (
	"bufio"
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Handshakes as clients we interoperate with send them (header order and
// values taken from their requests to the gateway).
var clientHandshakes = map[string]string{
	"chromium": "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:5020\r\nConnection: Upgrade\r\nPragma: no-cache\r\n" +
		"Cache-Control: no-cache\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36\r\n" +
		"Upgrade: websocket\r\nOrigin: http://127.0.0.1:5020\r\nSec-WebSocket-Version: 13\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n" +
		"Accept-Language: en-US,en;q=0.9\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
		"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\nSec-WebSocket-Protocol: edgemux.v1\r\n\r\n",
	"firefox": "GET /ws HTTP/1.1\r\nHost: plant-gw:5020\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n" +
		"Accept: */*\r\nAccept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate\r\nSec-WebSocket-Version: 13\r\n" +
		"Origin: http://plant-gw:5020\r\nSec-WebSocket-Protocol: edgemux.v1\r\nSec-WebSocket-Extensions: permessage-deflate\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nConnection: keep-alive, Upgrade\r\nPragma: no-cache\r\nCache-Control: no-cache\r\nUpgrade: websocket\r\n\r\n",
	"python-websockets": "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:5020\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\nSec-WebSocket-Protocol: edgemux.v1\r\n" +
		"User-Agent: Python/3.11 websockets/10.4\r\n\r\n",
	"node-ws": "GET /ws?client=7 HTTP/1.1\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
		"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n" +
		"Sec-WebSocket-Protocol: edgemux.v1\r\nHost: 127.0.0.1:5020\r\n\r\n",
	"bare LF":       "GET /ws HTTP/1.1\nHost: x\nUpgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13\n\n",
	"absolute-form": "GET http://gw.example:5020/ws HTTP/1.1\r\nHost: other\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
	"escaped path":  "GET /w%73 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
}

// Requests the parser refuses, each for its own reason.
var refusedRequests = map[string]string{
	"HTTP/1.0":           "GET /ws HTTP/1.0\r\nHost: x\r\n\r\n",
	"no Host":            "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
	"two Hosts":          "GET /ws HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"empty Host, then":   "GET /ws HTTP/1.1\r\nHost:\r\nHost: b\r\n\r\n",
	"folded line":        "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: web\r\n socket\r\n\r\n",
	"space before colon": "GET /ws HTTP/1.1\r\nHost : x\r\n\r\n",
	"no colon":           "GET /ws HTTP/1.1\r\nHost x\r\n\r\n",
	"bare CR in value":   "GET /ws HTTP/1.1\r\nHost: x\rInjected: 1\r\n\r\n",
	"NUL in value":       "GET /ws HTTP/1.1\r\nHost: x\x00\r\n\r\n",
	"control in target":  "GET /w\x01s HTTP/1.1\r\nHost: x\r\n\r\n",
	"bad method":         "G(T /ws HTTP/1.1\r\nHost: x\r\n\r\n",
	"two spaces":         "GET  /ws HTTP/1.1\r\nHost: x\r\n\r\n",
	"no version":         "GET /ws\r\nHost: x\r\n\r\n",
	"bad escape":         "GET /w%zz HTTP/1.1\r\nHost: x\r\n\r\n",
	"chunked":            "GET /ws HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
	"empty length":       "GET /ws HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n",
	"two lengths":        "GET /ws HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n",
	"not http":           "\x00\x01\x02\r\n\r\n",
}

// checkAgainstNetHTTP fails unless http.ReadRequest reads block as hr
// did: method, path, query, host and every kept header.
func checkAgainstNetHTTP(t *testing.T, hr *handshakeRequest, block []byte) {
	t.Helper()
	want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(block)))
	if err != nil {
		t.Fatalf("accepted what net/http refuses (%v): %q", err, block)
	}
	got := &hr.req
	if got.Method != want.Method || got.Host != want.Host || got.URL.Path != want.URL.Path ||
		got.URL.RawQuery != want.URL.RawQuery || got.URL.ForceQuery != want.URL.ForceQuery {
		t.Fatalf("read %s %q ? %q host %q; net/http %s %q ? %q host %q; from %q",
			got.Method, got.URL.Path, got.URL.RawQuery, got.Host, want.Method, want.URL.Path, want.URL.RawQuery, want.Host, block)
	}
	// net/http moves the body headers into fields: compare whether there
	// is a body.
	if hasBody(got.Header) != (want.ContentLength != 0 || len(want.TransferEncoding) > 0) {
		t.Fatalf("body: read %v, net/http length %d encoding %q; from %q", hasBody(got.Header), want.ContentLength, want.TransferEncoding, block)
	}
	for _, k := range keptHeaders {
		if !slices.Equal(got.Header[k], want.Header[k]) {
			t.Fatalf("%s: read %q, net/http %q; from %q", k, got.Header[k], want.Header[k], block)
		}
	}
}

func TestParseRequestClients(t *testing.T) {
	var pool requestPool
	for name, req := range clientHandshakes {
		t.Run(name, func(t *testing.T) {
			hr := pool.get()
			defer pool.put(hr)
			if err := hr.parse([]byte(req), "/ws"); err != nil {
				t.Fatalf("refused: %v", err)
			}
			checkAgainstNetHTTP(t, hr, []byte(req))
		})
	}
}

func TestParseRequestRefusals(t *testing.T) {
	var pool requestPool
	for name, req := range refusedRequests {
		t.Run(name, func(t *testing.T) {
			hr := pool.get()
			defer pool.put(hr)
			if err := hr.parse([]byte(req), "/ws"); err == nil {
				t.Fatalf("accepted %q", req)
			}
		})
	}
}

// A pooled request forgets everything of the previous one.
func TestParseRequestReuse(t *testing.T) {
	var pool requestPool
	hr := pool.get()
	if err := hr.parse([]byte(clientHandshakes["chromium"]), "/ws"); err != nil {
		t.Fatal(err)
	}
	pool.put(hr)
	hr = pool.get()
	defer pool.put(hr)
	short := "GET /other?q HTTP/1.1\r\nHost: y\r\nUpgrade: websocket\r\n\r\n"
	if err := hr.parse([]byte(short), "/ws"); err != nil {
		t.Fatal(err)
	}
	checkAgainstNetHTTP(t, hr, []byte(short))
}

// Whatever the parser accepts, net/http reads the same way; it may refuse
// more (it is stricter), never read differently.
func FuzzParseRequest(f *testing.F) {
	for _, req := range clientHandshakes {
		f.Add([]byte(req))
	}
	for _, req := range refusedRequests {
		f.Add([]byte(req))
	}
	f.Add([]byte(strings.Replace(clientHandshakes["node-ws"], "?client=7", "?", 1)))
	f.Add([]byte("GET //x/ws#frag HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		end := headerEnd(data)
		if end == 0 {
			return
		}
		var pool requestPool
		hr := pool.get()
		if err := hr.parse(data[:end], "/ws"); err == nil {
			checkAgainstNetHTTP(t, hr, data[:end])
		}
	})
}
