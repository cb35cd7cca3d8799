package websocket

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// memConn is the lightest protocols.Conn: output is dropped. The memory
// test uses it so the figure is the session's alone.
type memConn struct{}

func (*memConn) ID() uint64               { return 1 }
func (*memConn) Peer() netip.AddrPort     { return netip.AddrPort{} }
func (*memConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (*memConn) Write([]byte) error       { return nil }
func (*memConn) Buffered() int            { return 0 }
func (*memConn) Close(error)              {}
func (*memConn) SetTimer(time.Duration)   {}
func (*memConn) Notify()                  {}
func (*memConn) CountDropped(int)         {}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC() // and once more for what sync.Pool kept as victims
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestIdleSessionMemory measures the heap an idle upgraded connection
// holds: its session alone, since gorilla's Conn is leased per call (and,
// subscribed, the bus subscriber). Figures go to the log (go test -v -run
// Memory): 112 and 329 bytes when written; 112 and 361 since the bus
// subscriber holds a byte count, a drop count and pending replays. The bounds are only a
// regression guard, about twice that.
func TestIdleSessionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 handshakes")
	}
	const n = 10000
	req := []byte(upgradeRequest("/ws"))
	sub := clientFrame(finText, []byte(`{"op":"sub","topic":"plant/+/temp"}`))
	for _, tt := range []struct {
		name      string
		subscribe bool
		limit     uint64
	}{
		{"idle", false, 256},
		{"subscribed", true, 768},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := New(config.WebSocket{}, bus.New(bus.Options{}), nil)
			conns := make([]memConn, n)
			sessions := make([]protocols.Session, n)
			before := heapAfterGC()
			for i := range sessions {
				s, _ := h.Open(&conns[i])
				if k, err := s.Data(req); err != nil || k != len(req) {
					t.Fatalf("handshake: %d, %v", k, err)
				}
				if tt.subscribe {
					if _, err := s.Data(sub); err != nil {
						t.Fatal(err)
					}
					// The worker runs Notified next: the retained
					// replay the sub started finds nothing and ends.
					if err := s.(protocols.Notified).Notified(); err != nil {
						t.Fatal(err)
					}
				}
				sessions[i] = s
			}
			after := heapAfterGC()
			per := (after - before) / n
			t.Logf("%s: %d bytes per upgraded session (%d sessions)", tt.name, per, n)
			if per > tt.limit {
				t.Errorf("%d bytes per session, want at most %d", per, tt.limit)
			}
			runtime.KeepAlive(sessions)
			runtime.KeepAlive(conns)
		})
	}
}

func BenchmarkDataPub(b *testing.B) {
	h := New(config.WebSocket{}, bus.New(bus.Options{}), nil)
	o := newOffline(b, h)
	frame := clientFrame(finText, []byte(`{"op":"pub","topic":"plant/1/temp","data":21.5}`))
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if n, err := o.sess.Data(frame); err != nil || n != len(frame) {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkDataPubParallel is BenchmarkDataPub on every P at once, each
// goroutine a session of its own publishing to its own topic, as the
// gateway's workers do: what they share (the bus's locks and counters,
// the handler's counters) is what it measures beside the publish itself.
// Run with -cpu 1,2 to see the cost of sharing.
func BenchmarkDataPubParallel(b *testing.B) {
	h := New(config.WebSocket{}, bus.New(bus.Options{}), nil)
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		o := newOffline(b, h)
		topic := fmt.Sprintf("plant/%d/temp", next.Add(1))
		frame := clientFrame(finText, []byte(`{"op":"pub","topic":"`+topic+`","data":21.5}`))
		for pb.Next() {
			if n, err := o.sess.Data(frame); err != nil || n != len(frame) {
				b.Error(n, err)
				return
			}
		}
	})
}

func BenchmarkDataPing(b *testing.B) {
	h := New(config.WebSocket{}, bus.New(bus.Options{}), nil)
	o := newOffline(b, h)
	frame := clientFrame(finText, []byte(`{"op":"ping"}`))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.sess.Data(frame); err != nil {
			b.Fatal(err)
		}
		o.conn.out = o.conn.out[:0]
	}
}

// BenchmarkNotified is the delivery write path: drain one bus message,
// encode it, frame it through gorilla, hand it to the connection. The bus
// publish is outside the timer's concern but inside the loop.
func BenchmarkNotified(b *testing.B) {
	bb := bus.New(bus.Options{})
	h := New(config.WebSocket{}, bb, nil)
	o := newOffline(b, h)
	o.send(`{"op":"sub","topic":"plant/+/temp"}`)
	payload := []byte(`{"v":21.5}`)
	b.ReportAllocs()
	for b.Loop() {
		bb.Publish("plant/1/temp", payload, "modbus")
		if err := o.sess.(protocols.Notified).Notified(); err != nil {
			b.Fatal(err)
		}
		o.conn.out = o.conn.out[:0]
	}
}

func BenchmarkAppendDelivery(b *testing.B) {
	m := bus.Message{Topic: "plant/1/temp", Payload: []byte(`{"v":21.5}`), Src: "modbus", TS: 1}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendDelivery(buf[:0], &m)
	}
}

func BenchmarkScanner(b *testing.B) {
	frame := clientFrame(finText, make([]byte, 200))
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		sc := Scanner{MaxMessage: 1 << 16}
		for p := frame; len(p) > 0; {
			ev, err := sc.Next(p)
			if err != nil || ev.Kind == NeedMore {
				b.Fatal(err)
			}
			p = p[ev.N:]
		}
	}
}

func TestScannerAllocs(t *testing.T) {
	frame := cat(clientFrame(byte(OpText), make([]byte, 200)), clientFrame(finPing, nil), clientFrame(finCont, []byte("x")))
	n := testing.AllocsPerRun(100, func() {
		sc := Scanner{MaxMessage: 1 << 16}
		for p := frame; len(p) > 0; {
			ev, _ := sc.Next(p)
			p = p[ev.N:]
		}
	})
	if n != 0 {
		t.Errorf("Scanner allocates %v times per stream", n)
	}
}

// TestNoGoroutinePerSession: sessions, upgraded and subscribed, start no
// goroutines; the worker is the only one that runs them.
func TestNoGoroutinePerSession(t *testing.T) {
	h := New(config.WebSocket{}, bus.New(bus.Options{}), nil)
	req := []byte(upgradeRequest("/ws"))
	sub := clientFrame(finText, []byte(`{"op":"sub","topic":"a/#"}`))
	before := runtime.NumGoroutine()
	conns := make([]memConn, 1000)
	for i := range conns {
		s, _ := h.Open(&conns[i])
		s.Data(req)
		s.Data(sub)
	}
	// Slack for goroutines other tests leave winding down.
	if after := runtime.NumGoroutine(); after > before+10 {
		t.Errorf("%d goroutines after 1000 sessions, %d before", after, before)
	}
}

// BenchmarkHandshake is one upgrade from request bytes to an open session:
// its allocations are the garbage every new connection leaves behind.
func BenchmarkHandshake(b *testing.B) {
	h := New(config.WebSocket{}, bus.New(bus.Options{}), nil)
	req := []byte(upgradeRequest("/ws"))
	b.ReportAllocs()
	for b.Loop() {
		s, _ := h.Open(&memConn{})
		if k, err := s.Data(req); err != nil || k != len(req) {
			b.Fatalf("handshake: %d, %v", k, err)
		}
	}
}

// TestHotPathAllocs bounds the allocations of the benchmarked paths, so a
// change that brings back http.ReadRequest, a gorilla Conn per session or
// a buffer per call shows up as a failure, not only as a figure. The
// bounds are the counts measured when written (handshake 13, ping 8,
// delivery 2, and 0 since the session Releases what it drains, so a lone
// subscriber's payload is recycled: bus.Subscriber.Recycle) plus slack
// for a pool the GC emptied mid-run (AllocsPerRun rounds down).
func TestHotPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	h := New(config.WebSocket{}, bus.New(bus.Options{}), nil)
	req := []byte(upgradeRequest("/ws"))
	handshake := testing.AllocsPerRun(200, func() {
		s, _ := h.Open(&memConn{})
		s.Data(req)
	})
	o := newOffline(t, h)
	ping := clientFrame(finText, []byte(`{"op":"ping"}`))
	reply := testing.AllocsPerRun(200, func() {
		o.sess.Data(ping)
		o.conn.out = o.conn.out[:0]
	})
	o.send(`{"op":"sub","topic":"plant/+/temp"}`)
	o.conn.out = o.conn.out[:0]
	payload := []byte(`{"v":21.5}`)
	delivery := testing.AllocsPerRun(200, func() {
		h.bus.Publish("plant/1/temp", payload, "modbus")
		o.sess.(protocols.Notified).Notified()
		o.conn.out = o.conn.out[:0]
	})
	for _, c := range []struct {
		what      string
		got, most float64
	}{
		{"handshake", handshake, 15},
		{"ping and its pong", reply, 10},
		// to the session's lone subscriber: the payload in a recycled
		// buffer, the message copied out and recycled, the JSON in the
		// session's scratch
		{"publish and delivery", delivery, 0},
	} {
		if c.got > c.most {
			t.Errorf("%s: %v allocations, want at most %v", c.what, c.got, c.most)
		}
	}
}
