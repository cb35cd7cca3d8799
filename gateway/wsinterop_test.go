package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/protocols/websocket"
)

// debianPython is the interpreter with Debian's python3-websockets; the
// python3 first on PATH may be another installation without it.
const debianPython = "/usr/bin/python3"

const pythonInstallHint = "python3-websockets is not installed for " + debianPython +
	": run `make deps` (.ci/deps installs chromium and python3-websockets with apt-get)"

// interopMaxMessage is websocket.max_message for the interop test: small,
// so an oversized message is cheap to send.
const interopMaxMessage = 1024

// wsDelivery is a server push as a client sees it.
type wsDelivery struct {
	Topic    string          `json:"topic"`
	Data     json.RawMessage `json:"data"`
	TS       int64           `json:"ts"`
	Src      string          `json:"src"`
	Retained bool            `json:"retained"`
}

// wsInteropReport is what testdata/ws_client.py prints. Each case may
// carry "exception" instead of its fields.
type wsInteropReport struct {
	Version string `json:"websockets_version"`
	SubPub  struct {
		Exception   string     `json:"exception"`
		Subprotocol string     `json:"subprotocol"`
		Delivery    wsDelivery `json:"delivery"`
		CloseCode   int        `json:"close_code"`
	} `json:"sub_pub"`
	Retained   interopDelivery `json:"retained"`
	Fragmented interopDelivery `json:"fragmented"`
	Ping       struct {
		Exception string `json:"exception"`
		Pong      bool   `json:"pong"`
		AppPong   struct {
			Op string `json:"op"`
		} `json:"app_pong"`
	} `json:"ping"`
	BadOp struct {
		Exception string     `json:"exception"`
		Error     interopErr `json:"error"`
		BadFilter interopErr `json:"bad_filter"`
		Alive     bool       `json:"alive"`
	} `json:"bad_op"`
	ReservedOpcode interopClose `json:"reserved_opcode"`
	Unmasked       interopClose `json:"unmasked"`
	InvalidUTF8    interopClose `json:"invalid_utf8"`
	Oversize       interopClose `json:"oversize"`
	Bystander      struct {
		Exception string     `json:"exception"`
		Delivery  wsDelivery `json:"delivery"`
		CloseCode int        `json:"close_code"`
	} `json:"bystander"`
}

type interopDelivery struct {
	Exception string     `json:"exception"`
	Delivery  wsDelivery `json:"delivery"`
}

type interopErr struct {
	Op   string `json:"op"`
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

type interopClose struct {
	Exception string `json:"exception"`
	Code      int    `json:"close_code"`
	Reason    string `json:"close_reason"`
}

// TestWebSocketInterop drives /ws with python3-websockets, a client we did
// not write: subprotocol, sub and pub (its own publication comes back),
// retained replay, a fragmented message, ping and pong, rejected requests
// that leave the connection open, and broken frames that get their RFC
// 6455 close codes, while a bystander connection and a private-protocol
// device carry on unaffected.
func TestWebSocketInterop(t *testing.T) {
	requirePythonWebsockets(t)
	cfg := testConfig(t)
	cfg.WebSocket.MaxMessage = interopMaxMessage
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	device, err := private.Dial(ctx, addr, "interop-watcher", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer device.Close()
	if err := device.Subscribe("interop/#"); err != nil {
		t.Fatal(err)
	}

	rep := runInteropClient(t, ctx, "ws://"+addr+"/ws")
	t.Logf("python3-websockets %s", rep.Version)

	if c := rep.SubPub; c.Exception != "" || c.Subprotocol != "edgemux.v1" || c.CloseCode != 1000 {
		t.Errorf("sub/pub: %+v", c)
	}
	checkDelivery(t, "own publication", rep.SubPub.Delivery, "interop/a", `{"n":1,"s":"héllo"}`, false)
	checkDelivery(t, "retained replay", rep.Retained.Delivery, "interop/a", `{"n":1,"s":"héllo"}`, true)
	checkDelivery(t, "fragmented message", rep.Fragmented.Delivery, "interop/frag", `"in three fragments"`, false)
	if c := rep.Ping; c.Exception != "" || !c.Pong || c.AppPong.Op != "pong" {
		t.Errorf("ping: %+v", c)
	}
	if c := rep.BadOp; c.Exception != "" || !c.Alive || c.Error.Op != "error" || c.Error.Code == "" ||
		c.BadFilter.Op != "error" || c.BadFilter.Code == "" {
		t.Errorf("rejected requests: %+v", c)
	}
	for _, tc := range []struct {
		name string
		got  interopClose
		want int
	}{
		{"reserved opcode", rep.ReservedOpcode, 1002},
		{"unmasked client frame", rep.Unmasked, 1002},
		{"invalid UTF-8 in text", rep.InvalidUTF8, 1007},
		{"message over max_message", rep.Oversize, 1009},
	} {
		if tc.got.Exception != "" || tc.got.Code != tc.want {
			t.Errorf("%s: close %d %q (exception %q), want close %d",
				tc.name, tc.got.Code, tc.got.Reason, tc.got.Exception, tc.want)
		}
	}
	if c := rep.Bystander; c.Exception != "" || c.CloseCode != 1000 {
		t.Errorf("bystander: %+v", c)
	}
	checkDelivery(t, "bystander", rep.Bystander.Delivery, "interop/after", `"still here"`, false)

	// The device on the private protocol saw every WebSocket publication,
	// and nothing of the oversized one.
	seen := map[string]string{}
	for len(seen) < 3 {
		select {
		case m := <-device.Messages():
			if m.Src != websocket.Source || m.Topic == "interop/big" {
				t.Fatalf("device got %s from %q", m.Topic, m.Src)
			}
			seen[m.Topic] = string(m.Data)
		case <-ctx.Done():
			t.Fatalf("device deliveries: %v", seen)
		}
	}
	// A private device reads a WebSocket string as its text, and any other
	// JSON value as JSON text.
	if seen["interop/frag"] != `in three fragments` || seen["interop/after"] != `still here` ||
		seen["interop/a"] != `{"n": 1, "s": "h\u00e9llo"}` {
		t.Errorf("device deliveries: %q", seen)
	}
	// The protocol violations were counted with their reason.
	eventually(t, "the malformed frames in the quarantine book", func() bool {
		return g.Book().Stats().Reasons["malformed"] >= 3
	})
	httpGet(t, g, "/healthz")
}

// requirePythonWebsockets fails the test (skips it with -short) when
// Debian's python3-websockets is missing.
func requirePythonWebsockets(t *testing.T) {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import websockets").Run(); err != nil {
		if testing.Short() {
			t.Skip("-short: " + pythonInstallHint)
		}
		t.Fatalf("%s (%v)", pythonInstallHint, err)
	}
}

// runInteropClient runs testdata/ws_client.py against url and decodes its
// report.
func runInteropClient(t *testing.T, ctx context.Context, url string) wsInteropReport {
	t.Helper()
	cmd := exec.CommandContext(ctx, debianPython, "testdata/ws_client.py", url, strconv.Itoa(interopMaxMessage))
	// Only Debian's own modules: no user site or PYTHONPATH from elsewhere.
	cmd.Env = append(os.Environ(), "PYTHONNOUSERSITE=1", "PYTHONPATH=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ws_client.py: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	var rep wsInteropReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("ws_client.py report: %v\n%s", err, stdout.Bytes())
	}
	t.Logf("ws_client.py report: %s", stdout.Bytes())
	return rep
}

// checkDelivery compares a push with the expected topic, JSON data and
// retained flag, from the websocket source.
func checkDelivery(t *testing.T, what string, d wsDelivery, topic, data string, retained bool) {
	t.Helper()
	var got, want any
	if err := json.Unmarshal(d.Data, &got); err != nil {
		t.Errorf("%s: data %s: %v", what, d.Data, err)
		return
	}
	json.Unmarshal([]byte(data), &want)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if d.Topic != topic || !bytes.Equal(gb, wb) || d.Src != websocket.Source || d.Retained != retained || d.TS <= 0 {
		t.Errorf("%s: got %+v (data %s), want topic %s data %s src ws retained %v",
			what, d, d.Data, topic, data, retained)
	}
}
