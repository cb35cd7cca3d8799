package websocket

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	gorilla "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
)

func TestHandshakeSubprotocol(t *testing.T) {
	for _, ch := range chunkers {
		t.Run(ch.name, func(t *testing.T) {
			s := newServer(t, config.WebSocket{}, nil, ch.next)
			ws, p := s.dial(nil)
			if got := ws.Subprotocol(); got != "edgemux.v1" {
				t.Errorf("subprotocol = %q, want edgemux.v1", got)
			}
			syncPing(t, ws)
			var timer time.Duration
			p.do(func() { timer = p.f.conn.timer })
			if timer != DefaultPingInterval {
				t.Errorf("timer after upgrade = %v, want the ping interval", timer)
			}
			if st := s.h.Stats(); st.Upgrades != 1 || st.Sessions != 1 {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

func TestHandshakeWithoutSubprotocol(t *testing.T) {
	s := newServer(t, config.WebSocket{}, nil, chunkers[0].next)
	ws, _ := s.dialWith(&gorilla.Dialer{HandshakeTimeout: safetyNet}, "/ws", nil)
	if ws.Subprotocol() != "" {
		t.Errorf("subprotocol = %q, want none", ws.Subprotocol())
	}
	syncPing(t, ws)
}

func TestOrigin(t *testing.T) {
	tests := []struct {
		name    string
		allowed []string
		origin  string
		ok      bool
	}{
		{"same origin by default", nil, "http://HOST", true},
		{"no origin by default", nil, "", true},
		{"other origin by default", nil, "https://evil.example", false},
		{"any", []string{"*"}, "https://evil.example", true},
		{"listed", []string{"https://good.example", "http://plant:8080"}, "HTTP://PLANT:8080", true},
		{"listed, no origin", []string{"https://good.example"}, "", true},
		{"not listed", []string{"https://good.example"}, "https://evil.example", false},
		{"host is not enough", []string{"https://good.example"}, "http://HOST", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, config.WebSocket{AllowedOrigins: tt.allowed}, nil, chunkers[0].next)
			header := http.Header{}
			if tt.origin != "" {
				header.Set("Origin", strings.Replace(tt.origin, "HOST", s.ln.Addr().String(), 1))
			}
			d := &gorilla.Dialer{HandshakeTimeout: safetyNet}
			ws, resp, err := d.Dial(s.url("/ws"), header)
			p := s.next()
			if tt.ok {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				ws.Close()
				return
			}
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("dial = %v, want 403", err)
			}
			if reason := p.waitClosed(t); !errors.Is(reason, ErrForbidden) {
				t.Errorf("reason %v", reason)
			}
			if s.h.Stats().Forbidden != 1 {
				t.Errorf("stats = %+v", s.h.Stats())
			}
		})
	}
}

func TestHandshakeRefusals(t *testing.T) {
	tests := []struct {
		name   string
		req    string
		status string
		reason error
	}{
		{"wrong path", upgradeRequest("/other"), "HTTP/1.1 404 Not Found", ErrNotFound},
		{"path with query is fine", upgradeRequest("/ws?x=1"), "HTTP/1.1 101 Switching Protocols", nil},
		{"header too large", "GET /ws HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 600), "HTTP/1.1 431 Request Header Fields Too Large", ErrHeaderTooLarge},
		{"not http", "\x00\x01\x02\r\n\r\n", "HTTP/1.1 400 Bad Request", ErrBadRequest},
		{"no key", "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
			"HTTP/1.1 400 Bad Request", ErrBadRequest},
		{"old version", strings.Replace(upgradeRequest("/ws"), "Version: 13", "Version: 8", 1), "HTTP/1.1 400 Bad Request", ErrBadRequest},
		{"post", strings.Replace(upgradeRequest("/ws"), "GET", "POST", 1), "HTTP/1.1 405 Method Not Allowed", ErrBadRequest},
		{"body", upgradeRequest("/ws", "Content-Length: 5\r\n"), "HTTP/1.1 400 Bad Request", ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, config.WebSocket{MaxHeaderBytes: 512}, nil, chunkers[2].next)
			nc, err := dialRaw(s)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			p := s.next()
			nc.Write([]byte(tt.req))
			line := readLine(t, nc)
			if line != tt.status {
				t.Fatalf("answer %q, want %q", line, tt.status)
			}
			if tt.reason == nil {
				return
			}
			if reason := p.waitClosed(t); !errors.Is(reason, tt.reason) {
				t.Errorf("reason %v, want %v", reason, tt.reason)
			}
		})
	}
}

func TestHandshakeTimeout(t *testing.T) {
	s := newServer(t, config.WebSocket{HandshakeTimeout: 5 * time.Second}, nil, chunkers[0].next)
	nc, err := dialRaw(s)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p := s.next()
	nc.Write([]byte("GET /ws HTTP/1.1\r\n")) // and nothing more
	var timer time.Duration
	p.do(func() { timer = p.f.conn.timer })
	if timer != 5*time.Second {
		t.Fatalf("handshake timer %v", timer)
	}
	p.do(p.f.timer) // the gateway's wheel says the time is up
	if line := readLine(t, nc); line != "HTTP/1.1 408 Request Timeout" {
		t.Errorf("answer %q", line)
	}
	if reason := p.waitClosed(t); !errors.Is(reason, ErrHandshakeTimeout) {
		t.Errorf("reason %v", reason)
	}
	if s.h.Stats().HandshakeTimeouts != 1 {
		t.Errorf("stats %+v", s.h.Stats())
	}
}

func TestPipelinedFramesAfterHandshake(t *testing.T) {
	h := New(config.WebSocket{}, bus.New(bus.Options{}), nil)
	c := newFakeConn()
	sess, _ := h.Open(c)
	c.sess = sess
	f := feeder{conn: c, sess: sess}
	f.feed(append([]byte(upgradeRequest("/ws")), clientFrame(finText, []byte(`{"op":"ping"}`))...))
	if c.closed || !bytes.HasSuffix(c.out, []byte(`{"op":"pong"}`)) {
		t.Errorf("closed %v (%v), out %q", c.closed, c.reason, c.out)
	}
}

// Reload applies to new handshakes at once and to open sessions from
// their next call.
func TestReload(t *testing.T) {
	h := New(config.WebSocket{AllowedOrigins: []string{"https://a.example"}, MaxSubs: 1}, bus.New(bus.Options{}), nil)
	open := newOffline(t, h, "Origin: https://a.example\r\n")
	open.send(`{"op":"sub","topic":"x"}`)
	open.send(`{"op":"sub","topic":"y"}`)
	if f := open.frames(t); len(f) != 1 || !strings.Contains(f[0].payload, CodeTooManySubs) {
		t.Fatalf("second sub with max_subs 1: %+v", f)
	}
	refused := newFakeConn()
	sess, _ := h.Open(refused)
	refused.sess = sess
	(&feeder{conn: refused, sess: sess}).feed([]byte(upgradeRequest("/ws", "Origin: https://b.example\r\n")))
	if !bytes.HasPrefix(refused.out, []byte("HTTP/1.1 403 ")) {
		t.Fatalf("origin b before reload: %q", refused.out)
	}

	h.Reload(config.WebSocket{AllowedOrigins: []string{"https://b.example"}, MaxSubs: 2, PingInterval: 7 * time.Second})
	newOffline(t, h, "Origin: https://b.example\r\n") // fails the test unless upgraded
	open.send(`{"op":"sub","topic":"y"}`)
	if f := open.frames(t); len(f) != 0 {
		t.Errorf("second sub after reload to max_subs 2: %+v", f)
	}
	open.timer()
	if open.conn.timer != 7*time.Second {
		t.Errorf("ping interval after reload: %v", open.conn.timer)
	}
	if got := h.Config(); got.MaxSubs != 2 || got.Path != DefaultPath {
		t.Errorf("Config after reload: %+v", got)
	}
}
