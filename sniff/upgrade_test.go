package sniff

import "testing"

// upgradeCases is HTTPUpgrade's table; FuzzHTTPUpgrade is seeded from it.
var upgradeCases = []struct {
	name          string
	in            []byte
	wantWebSocket bool
	wantNeed      bool
}{
	{"browser", browserUpgrade, true, false},
	{"firefox keep-alive, Upgrade", firefoxUpgrade, true, false},
	{"gorilla client", []byte("GET /ws HTTP/1.1\r\nHost: gw\r\nUser-Agent: Go-http-client/1.1\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nUpgrade: websocket\r\n\r\n"), true, false},
	{"spaces and tabs", []byte("GET / HTTP/1.1\r\nUPGRADE:\t websocket \r\nConnection :upgrade\r\n\r\n"), true, false},
	{"bare LF lines", []byte("GET / HTTP/1.1\nUpgrade: websocket\nConnection: Upgrade\r\n\r\n"), true, false},
	{"body after headers", append(append([]byte{}, browserUpgrade...), "junk"...), true, false},
	{"curl get", curlGet, false, false},
	{"h2c upgrade", []byte("GET / HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\r\n"), false, false},
	{"no connection header", []byte("GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"), false, false},
	{"no upgrade header", []byte("GET / HTTP/1.1\r\nConnection: Upgrade\r\n\r\n"), false, false},
	{"connection close", []byte("GET / HTTP/1.1\r\nConnection: close\r\nUpgrade: websocket\r\n\r\n"), false, false},
	{"token inside a word", []byte("GET / HTTP/1.1\r\nConnection: noupgrade\r\nUpgrade: websockets\r\n\r\n"), false, false},
	{"look-alike header name", []byte("GET / HTTP/1.1\r\nX-Connection: upgrade\r\nX-Upgrade: websocket\r\n\r\n"), false, false},
	{"post with upgrade", []byte("POST / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"), false, false},
	{"headers after blank line ignored", []byte("GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\nConnection: Upgrade\r\n\r\n"), false, false},
	{"empty", nil, false, true},
	{"request line only", []byte("GET /ws HTTP/1.1\r\n"), false, true},
	{"all but the last byte", browserUpgrade[:len(browserUpgrade)-1], false, true},
	{"post incomplete", []byte("POST / HTTP/1.1\r\n"), false, true},
}

func TestHTTPUpgrade(t *testing.T) {
	for _, tt := range upgradeCases {
		t.Run(tt.name, func(t *testing.T) {
			ws, need := HTTPUpgrade(tt.in)
			if ws != tt.wantWebSocket || need != tt.wantNeed {
				t.Errorf("HTTPUpgrade(%q) = %v, %v; want %v, %v", tt.in, ws, need, tt.wantWebSocket, tt.wantNeed)
			}
		})
	}
}

func TestHTTPUpgradeAllocs(t *testing.T) {
	for _, in := range [][]byte{browserUpgrade, firefoxUpgrade, curlGet, browserUpgrade[:40]} {
		if n := testing.AllocsPerRun(100, func() { HTTPUpgrade(in) }); n != 0 {
			t.Errorf("HTTPUpgrade(%q) allocates %v times", in[:20], n)
		}
	}
}

func BenchmarkHTTPUpgrade(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if ws, _ := HTTPUpgrade(browserUpgrade); !ws {
			b.Fatal("not a websocket upgrade")
		}
	}
}
