package gateway

// Shutdown under every dispatch policy, with live connections of every
// protocol and clients still dialling: each session hears its protocol's
// goodbye, output is flushed and the socket closed cleanly (EOF, not a
// reset), and afterwards no fd, registry slot or goroutine of the
// gateway's is left.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/registry"
)

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// baseline settles what the process holds before a gateway starts: the
// runtime's own poller is made on first use, so use it once first.
func baseline(t *testing.T) (fds, goroutines int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return openFDs(t), runtime.NumGoroutine()
}

// expectReleased checks, after Run returned, that the gateway left no
// connection, fd or goroutine behind.
func expectReleased(t *testing.T, g *Gateway, fds, goroutines int) {
	t.Helper()
	if n := g.reg.Len(); n != 0 {
		t.Errorf("%d registry slots still open", n)
	}
	for fd := range g.reg.Size() {
		if st := g.reg.Slot(fd).State(); st != 0 {
			t.Errorf("slot %d left %v", fd, st)
		}
	}
	eventually(t, "the fds back to the baseline", func() bool { return openFDs(t) <= fds })
	eventually(t, "the goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= goroutines })
}

// runLogged runs a gateway whose log goes to a buffer; it returns the
// channel Run's result arrives on.
func runLogged(t *testing.T, policy string, log *syncBuffer) (*Gateway, <-chan error) {
	t.Helper()
	cfg := rbConfig(t)
	cfg.Dispatch.Policy = policy
	cfg.Log.Level = "info"
	// A silent connection lands in quarantine soon and is held there.
	cfg.Sniff.Deadline = 300 * time.Millisecond
	cfg.Quarantine.Hold = 10 * time.Minute
	g, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	<-g.Ready()
	return g, done
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// wsSubscriber dials the WebSocket endpoint and subscribes.
func wsSubscriber(t *testing.T, addr string) *gws.Conn {
	t.Helper()
	ws, _, err := gws.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{`{"op":"sub","topic":"drain/#"}`, `{"op":"ping"}`} {
		if err := ws.WriteMessage(gws.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	ws.SetReadDeadline(time.Now().Add(rbIOTimeout))
	if _, p, err := ws.ReadMessage(); err != nil || !bytes.Contains(p, []byte("pong")) {
		t.Fatalf("ping: %s, %v", p, err)
	}
	return ws
}

// handedOver counts the connections workers own.
func handedOver(g *Gateway) int { return inState(g, registry.Active) }

// quarantined counts the connections the quarantine pool holds.
func quarantined(g *Gateway) int { return inState(g, registry.Quarantined) }

func inState(g *Gateway, st registry.State) int {
	n := 0
	for fd := range g.reg.Size() {
		if g.reg.Slot(fd).State() == st {
			n++
		}
	}
	return n
}

// modbusRead is an FC3 request (unit 1, one holding register at 0).
var modbusRead = []byte{0x00, 0x07, 0x00, 0x00, 0x00, 0x06, 0x01, 0x03, 0x00, 0x00, 0x00, 0x01}

// expectGoingAway reads the private device's last frame, ERROR
// GOING_AWAY, and then a clean EOF.
func expectGoingAway(t *testing.T, c net.Conn) {
	t.Helper()
	f, err := rbReadFrame(c)
	if err != nil {
		t.Fatalf("private device: %v, want ERROR GOING_AWAY", err)
	}
	m, err := private.DecodeError(f.Payload)
	if f.Type != private.TypeError || err != nil || private.Code(m.Code) != private.CodeGoingAway {
		t.Fatalf("private device got %v %x, want ERROR GOING_AWAY", f.Type, f.Payload)
	}
	expectEOF(t, "private device", c)
}

// expectEOF reads until the end and wants a clean close, not a reset.
func expectEOF(t *testing.T, who string, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(rbIOTimeout))
	if n, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("%s: %v after %d more bytes, want EOF", who, err, n)
	}
}

// dialDuringShutdown dials and says HELLO again and again until stop
// closes; every attempt must end: refused, served, told to go, or closed.
func dialDuringShutdown(addr string, stop <-chan struct{}) <-chan error {
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := net.DialTimeout("tcp", addr, rbIOTimeout)
			if err != nil {
				continue // refused: the listener is gone
			}
			c.Write(rbHelloFrame("late"))
			c.SetReadDeadline(time.Now().Add(rbIOTimeout))
			_, err = io.Copy(io.Discard, c)
			c.Close()
			if err != nil && !rbIsReset(err) {
				errc <- err // a hang: the read deadline passed
				return
			}
		}
	}()
	return errc
}

func TestShutdownDrainsEveryProtocol(t *testing.T) {
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			fds, goroutines := baseline(t)
			var log syncBuffer
			g, done := runLogged(t, policy, &log)
			addr := g.Addr().String()

			device, err := rbHelloConn(addr, rbAnySource, "drain-device")
			if err != nil {
				t.Fatal(err)
			}
			defer device.Close()
			ws := wsSubscriber(t, addr)
			defer ws.Close()
			master, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer master.Close()
			// A request in flight: enough of it now to be classified, the
			// rest once the drain has begun.
			if err := rbWrite(master, modbusRead[:8]); err != nil {
				t.Fatal(err)
			}
			eventually(t, "all three connections handed over", func() bool { return handedOver(g) == 3 })
			// A silent connection held in quarantine and an admin client
			// keeping its connection alive.
			junk, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer junk.Close()
			eventually(t, "the silent connection in quarantine", func() bool { return quarantined(g) == 1 })
			admin, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			rbWrite(admin, []byte("GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"))
			admin.SetReadDeadline(time.Now().Add(rbIOTimeout))
			if _, err := admin.Read(make([]byte, 4096)); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			dialer := dialDuringShutdown(addr, stop)

			ctx, cancel := context.WithTimeout(context.Background(), rbIOTimeout)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- g.Shutdown(ctx) }()

			expectGoingAway(t, device)
			device.Close()
			ws.SetReadDeadline(time.Now().Add(rbIOTimeout))
			_, _, err = ws.ReadMessage()
			var ce *gws.CloseError
			if !errors.As(err, &ce) || ce.Code != gws.CloseGoingAway {
				t.Fatalf("websocket: %v, want close 1001", err)
			}
			ws.Close()
			if err := rbWrite(master, modbusRead[8:]); err != nil {
				t.Fatal(err)
			}
			var answer [9]byte
			master.SetReadDeadline(time.Now().Add(rbIOTimeout))
			if _, err := io.ReadFull(master, answer[:]); err != nil || answer[7] != 0x83 {
				t.Fatalf("modbus master: % x, %v; want the request answered (exception 0x83)", answer, err)
			}
			expectEOF(t, "modbus master", master)
			master.Close()

			expectEOF(t, "quarantined connection", junk)
			junk.Close()
			expectEOF(t, "admin keep-alive connection", admin)
			admin.Close()
			if err := <-shut; err != nil {
				t.Errorf("Shutdown: %v, want every connection drained within the grace", err)
			}
			close(stop)
			if err := <-dialer; err != nil {
				t.Errorf("a client dialling during the shutdown: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			expectReleased(t, g, fds, goroutines)
			if !strings.Contains(log.String(), "msg=stopped") || !strings.Contains(log.String(), "cut=0") {
				t.Errorf("no final log line saying nothing was cut:\n%s", log.String())
			}
		})
	}
}

// TestShutdownCutsAtGrace: peers that never answer the goodbye hold the
// drain until its grace ends, with the workers parked meanwhile; then
// they are cut, and nothing is left.
func TestShutdownCutsAtGrace(t *testing.T) {
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			fds, goroutines := baseline(t)
			var log syncBuffer
			g, done := runLogged(t, policy, &log)
			addr := g.Addr().String()
			// A WebSocket client that never reads (so never echoes the
			// close) and a device that never hangs up.
			ws := wsSubscriber(t, addr)
			defer ws.Close()
			device, err := rbHelloConn(addr, rbAnySource, "stubborn")
			if err != nil {
				t.Fatal(err)
			}
			defer device.Close()

			ctx, cancel := context.WithCancel(context.Background())
			shut := make(chan error, 1)
			go func() { shut <- g.Shutdown(ctx) }()
			f, err := rbReadFrame(device)
			if err != nil || f.Type != private.TypeError {
				t.Fatalf("device: %v %v, want ERROR GOING_AWAY", f.Type, err)
			}
			if policy != "inline" {
				for _, w := range g.workers {
					eventually(t, "every draining worker parked", w.park.Parked)
				}
			}
			if g.reg.Len() == 0 {
				t.Fatal("the stubborn peers are gone before the grace ended")
			}
			cancel() // the grace ends
			if err := <-shut; !errors.Is(err, context.Canceled) {
				t.Errorf("Shutdown: %v, want the grace's end", err)
			}
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			ws.UnderlyingConn().SetReadDeadline(time.Now().Add(rbIOTimeout))
			if _, err := io.Copy(io.Discard, ws.UnderlyingConn()); err != nil && !rbIsReset(err) {
				t.Errorf("websocket client after the cut: %v", err)
			}
			ws.Close()
			device.Close()
			expectReleased(t, g, fds, goroutines)
			if !strings.Contains(log.String(), "cut=2") {
				t.Errorf("the final log line does not count the two cut:\n%s", log.String())
			}
		})
	}
}

// TestCloseReleasesQueuedHandOvers: Close while connections wait in the
// rings for their hand-over (their worker is held up in one session's
// Open, and more of them wait than the worker takes in one turn) leaves
// no fd or slot behind. The inline policy has no rings: its loop opens
// each session as it classifies it.
func TestCloseReleasesQueuedHandOvers(t *testing.T) {
	for _, policy := range []string{"entropy", "roundrobin"} {
		t.Run(policy, func(t *testing.T) {
			fds, goroutines := baseline(t)
			cfg := rbConfig(t)
			cfg.Dispatch.Policy = policy
			cfg.Pools["private"] = config.Pool{Workers: 1, Protocols: []string{"private"}}
			held := &heldHandler{entered: make(chan struct{}, 1), release: make(chan struct{})}
			g, err := New(cfg, Options{Handlers: map[string]protocols.Handler{"private": held}})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- g.Run(context.Background()) }()
			<-g.Ready()
			addr := g.Addr().String()
			var conns []net.Conn
			hello := rbHelloFrame("queued")
			for i := range eventsPerRing + 50 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				c.Write(hello)
				conns = append(conns, c)
				if i == 0 {
					<-held.entered // the worker is stuck in the first Open
				}
			}
			eventually(t, "every connection classified", func() bool { return handedOver(g) == len(conns) })
			g.Close()
			close(held.release)
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			for _, c := range conns {
				c.Close()
			}
			expectReleased(t, g, fds, goroutines)
		})
	}
}

// heldHandler holds its worker in the first Open until released.
type heldHandler struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *heldHandler) Open(c protocols.Conn) (protocols.Session, error) {
	h.once.Do(func() {
		h.entered <- struct{}{}
		<-h.release
	})
	return nopSession{}, nil
}

type nopSession struct{}

func (nopSession) Data(in []byte) (int, error) { return len(in), nil }
func (nopSession) Closed(error)                {}
