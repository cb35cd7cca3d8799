package gateway

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	gorilla "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
)

// WebSocket requests whose header block completes only after the sniff
// deadline: they go to the WebSocket handler (101, its 400/404, or 408),
// never to the admin endpoints.

// slowWSConfig is a gateway whose sniff deadline is short, so a client can
// send its request headers past it without a long test.
func slowWSConfig(t *testing.T, handshake time.Duration) config.Config {
	cfg := rbConfig(t)
	cfg.Sniff.Deadline = 200 * time.Millisecond
	cfg.WebSocket.HandshakeTimeout = handshake
	return cfg
}

// sendPastDeadline writes first, waits until the gateway has classified
// one more connection (c, which it can only do once the sniff deadline
// passed: its header block is incomplete), then writes rest.
func sendPastDeadline(t *testing.T, g *Gateway, c net.Conn, first, rest []byte) error {
	t.Helper()
	before := classifiedTotal(g)
	if err := rbWrite(c, first); err != nil {
		return err
	}
	eventually(t, "the sniff deadline", func() bool { return classifiedTotal(g) > before })
	return rbWrite(c, rest)
}

// classifiedTotal counts the connections the gateway has classified, by
// any protocol and action.
func classifiedTotal(g *Gateway) uint64 {
	var n uint64
	for _, v := range g.Snapshot().Classified {
		n += v
	}
	return n
}

// trickleConn splits the client's first write (its handshake request)
// around the gateway's sniff deadline.
type trickleConn struct {
	net.Conn
	t    *testing.T
	g    *Gateway
	once sync.Once
}

func (c *trickleConn) Write(p []byte) (int, error) {
	var err error
	done := false
	c.once.Do(func() {
		done = true
		cut := bytes.Index(p, []byte("\r\n")) + 2 // the request line alone
		err = sendPastDeadline(c.t, c.g, c.Conn, p[:cut], p[cut:])
	})
	if done {
		if err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// TestWebSocketUpgradeCompletedAfterSniffDeadline: a real gorilla client
// whose handshake request is cut after its request line, the rest sent
// once the sniff deadline has passed, still gets its 101 and a working
// session (before, the admin handler answered 404).
func TestWebSocketUpgradeCompletedAfterSniffDeadline(t *testing.T) {
	g := startGateway(t, slowWSConfig(t, rbIOTimeout), Options{})
	d := gorilla.Dialer{
		HandshakeTimeout: rbIOTimeout,
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", g.Addr().String())
			if err != nil {
				return nil, err
			}
			return &trickleConn{Conn: c, t: t, g: g}, nil
		},
	}
	ws, resp, err := d.Dial("ws://"+g.Addr().String()+"/ws", nil)
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("dial: %v (%s)", err, status)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(rbIOTimeout))
	if err := ws.WriteMessage(gorilla.TextMessage, []byte(`{"op":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.ReadMessage(); err != nil || !strings.Contains(string(msg), `"pong"`) {
		t.Fatalf("ping answered with %q, %v", msg, err)
	}
	if n := g.Snapshot().Classified["websocket handle"]; n != 1 {
		t.Errorf("classified as websocket %d times, want 1: %v", n, g.Snapshot().Classified)
	}
}

// TestWebSocketRequestNeverCompletedGets408: a handshake request still
// incomplete at the sniff deadline goes to the WebSocket handler, which
// answers 408 once websocket.handshake_timeout has passed, and closes.
func TestWebSocketRequestNeverCompletedGets408(t *testing.T) {
	g := startGateway(t, slowWSConfig(t, 300*time.Millisecond), Options{})
	c := dial(t, g)
	if err := rbWrite(c, []byte("GET /ws HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(readToEOF(t, c))), nil)
	if err != nil {
		t.Fatalf("no HTTP answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("answer %s, want 408", resp.Status)
	}
}

// TestTrickledPlainHTTPIsNotAdmin: a plain GET whose header block
// completes after the sniff deadline is answered by the WebSocket handler
// (404: not its path), not served by the admin endpoints (before, /healthz
// answered 200 to it). Slow senders never reach the admin handler.
func TestTrickledPlainHTTPIsNotAdmin(t *testing.T) {
	g := startGateway(t, slowWSConfig(t, rbIOTimeout), Options{})
	c := dial(t, g)
	if err := sendPastDeadline(t, g, c, []byte("GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n"), []byte("\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(readToEOF(t, c))), nil)
	if err != nil {
		t.Fatalf("no HTTP answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("answer %s, want the WebSocket handler's 404", resp.Status)
	}
	// A prompt /healthz is still the admin handler's.
	if body := httpGet(t, g, "/healthz"); !strings.Contains(body, `"status"`) {
		t.Errorf("prompt /healthz: %q", body)
	}
}
