package private

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// netConn adapts a net.Conn to protocols.Conn for the test server: one
// goroutine per connection plays the worker, another reads the socket.
type netConn struct {
	c      net.Conn
	notify chan struct{}
	once   sync.Once
	sess   protocols.Session
}

func (n *netConn) ID() uint64               { return 1 }
func (n *netConn) Peer() netip.AddrPort     { return netip.MustParseAddrPort(n.c.RemoteAddr().String()) }
func (n *netConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (n *netConn) Buffered() int            { return 0 }
func (n *netConn) Write(p []byte) error {
	if _, err := n.c.Write(p); err != nil {
		return protocols.ErrClosed
	}
	return nil
}
func (n *netConn) Close(reason error) {
	n.once.Do(func() {
		_ = n.c.Close()
		n.sess.Closed(reason)
	})
}
func (n *netConn) SetTimer(time.Duration) {}
func (n *netConn) CountDropped(int)       {}
func (n *netConn) Notify() {
	select {
	case n.notify <- struct{}{}:
	default: // coalesce, like the worker
	}
}

// serve runs h on a loopback listener until the test ends, when it closes
// the listener and every connection and waits for their goroutines.
func serve(t *testing.T, h protocols.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			nc := &netConn{c: c, notify: make(chan struct{}, 1)}
			wg.Go(func() { work(nc, h) })
		}
	})
	return ln.Addr().String()
}

// work is the test's worker: input and notifications, one at a time.
func work(nc *netConn, h protocols.Handler) {
	sess, err := h.Open(nc)
	if err != nil {
		_ = nc.c.Close()
		return
	}
	nc.sess = sess
	reads := make(chan []byte)
	go func() {
		defer close(reads)
		for {
			buf := make([]byte, 4096)
			n, err := nc.c.Read(buf)
			if n > 0 {
				reads <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	var pending []byte
	for {
		select {
		case chunk, ok := <-reads:
			if !ok {
				nc.Close(protocols.ErrPeerClosed)
				return
			}
			pending = append(pending, chunk...)
			n, err := sess.Data(pending)
			pending = pending[:copy(pending, pending[n:])]
			if err != nil {
				nc.Close(err)
				drain(reads)
				return
			}
		case <-nc.notify:
			if err := sess.(protocols.Notified).Notified(); err != nil {
				nc.Close(err)
				drain(reads)
				return
			}
		}
	}
}

func drain(reads chan []byte) {
	for range reads {
	}
}

func dial(t *testing.T, addr, id string, opt ClientOptions) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Dial(ctx, addr, id, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// next waits for a delivery, generously: machines are slow and shared.
func next(t *testing.T, c *Client) Delivery {
	t.Helper()
	select {
	case d, ok := <-c.Messages():
		if !ok {
			t.Fatalf("connection ended: %v", c.Err())
		}
		return d
	case <-time.After(time.Minute):
		t.Fatal("no delivery")
	}
	return Delivery{}
}

func TestClientPubSub(t *testing.T) {
	addr := serve(t, New(config.Private{}, bus.New(bus.Options{}), nil))
	sub := dial(t, addr, "sub", ClientOptions{})
	pub := dial(t, addr, "pub", ClientOptions{Keepalive: 30 * time.Second})

	if err := pub.Publish("c/kept", []byte("old"), true); err != nil {
		t.Fatal(err)
	}
	if err := sub.Subscribe("c/+"); err != nil {
		t.Fatal(err)
	}
	if d := next(t, sub); d.Topic != "c/kept" || string(d.Data) != "old" || !d.Retained || d.Src != Source || d.TS.IsZero() {
		t.Fatalf("retained delivery %+v", d)
	}
	if err := pub.Publish("c/live", []byte("new"), false); err != nil {
		t.Fatal(err)
	}
	if d := next(t, sub); d.Topic != "c/live" || string(d.Data) != "new" || d.Retained {
		t.Fatalf("live delivery %+v", d)
	}

	// After UNSUB of c/+, only the other filter's topic arrives: the
	// publisher's acked PUBs are ordered, so "c/x" would come first.
	if err := sub.Subscribe("d/#"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Unsubscribe("c/+"); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("c/x", nil, true); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("d/y", []byte("1"), true); err != nil {
		t.Fatal(err)
	}
	if d := next(t, sub); d.Topic != "d/y" {
		t.Fatalf("after UNSUB got %+v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sub.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClientRequestErrors(t *testing.T) {
	addr := serve(t, New(config.Private{MaxTopic: 16}, bus.New(bus.Options{}), nil))
	errs := make(chan Code, 4)
	c := dial(t, addr, "dev", ClientOptions{OnError: func(code Code, _ string) { errs <- code }})
	cases := []struct {
		name string
		run  func() error
		want Code
	}{
		{"bad topic", func() error { return c.Publish("a/#", nil, true) }, CodeBadTopic},
		{"long topic", func() error { return c.Publish("0123456789abcdefg", nil, true) }, CodeTopicTooLong},
		{"bad filter", func() error { return c.Subscribe("a/#/b") }, CodeBadFilter},
		{"bad unsub", func() error { return c.Unsubscribe("") }, CodeBadFilter},
		{"pub to a gateway topic", func() error { return c.Publish("$SYS/edgemux/x", []byte("1"), true) }, CodeReservedTopic},
		{"sub of gateway topics", func() error { return c.Subscribe("$SYS/#") }, CodeReservedTopic},
	}
	for _, tc := range cases {
		if err := tc.run(); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	// Without an ack the failure comes back as an ERROR frame.
	if err := c.Publish("", nil, false); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-errs:
		if code != CodeBadTopic {
			t.Fatalf("OnError got %v", code)
		}
	case <-time.After(time.Minute):
		t.Fatal("no ERROR frame")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("connection lost after recoverable errors: %v", err)
	}
}

func TestClientClose(t *testing.T) {
	b := bus.New(bus.Options{})
	addr := serve(t, New(config.Private{}, b, nil))
	c := dial(t, addr, "dev", ClientOptions{})
	if err := c.Subscribe("x"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-c.Messages(); ok {
		t.Fatal("Messages still open")
	}
	if err := c.Publish("x", nil, false); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if !errors.Is(c.Err(), ErrClientClosed) {
		t.Fatalf("Err %v", c.Err())
	}
	waitFor(t, "subscriber released", func() bool { return b.Stats().Subscribers == 0 })
}

// waitFor polls cond with a generous limit instead of sleeping a guess.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting: %s", what)
}

// rawServer accepts one connection and lets answer reply to what arrives.
func rawServer(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		answer(c)
	})
	return ln.Addr().String()
}

func TestDialFailures(t *testing.T) {
	readHello := func(c net.Conn) {
		buf := make([]byte, 256)
		_, _ = c.Read(buf)
	}
	cases := []struct {
		name   string
		answer func(net.Conn)
		want   error
	}{
		{"garbage", func(c net.Conn) { readHello(c); _, _ = c.Write([]byte("HTTP/1.1 400 Bad\r\n")) }, ErrBadMagic},
		{"fatal error", func(c net.Conn) {
			readHello(c)
			_, _ = c.Write(AppendError(nil, CodeNotHelloFirst, "no"))
		}, CodeNotHelloFirst},
		{"refused hello", func(c net.Conn) { readHello(c); _, _ = c.Write(AppendAck(nil, Ack{Status: CodeBusy})) }, CodeBusy},
		{"hangs up", func(c net.Conn) { readHello(c) }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := rawServer(t, tc.answer)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := Dial(ctx, addr, "dev", ClientOptions{})
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Dial(context.Background(), "127.0.0.1:1", "", ClientOptions{}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty device id: %v", err)
	}
}

// TestDialContext: a server that never answers; Dial returns when its
// context ends (the test asserts only that it returns, not how fast).
func TestDialContext(t *testing.T) {
	release := make(chan struct{})
	addr := rawServer(t, func(net.Conn) { <-release })
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := Dial(ctx, addr, "dev", ClientOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

func TestClientAnswersPing(t *testing.T) {
	got := make(chan []byte, 1)
	addr := rawServer(t, func(c net.Conn) {
		buf := make([]byte, 256)
		_, _ = c.Read(buf)
		_, _ = c.Write(AppendAck(nil, Ack{}))
		_, _ = c.Write(AppendFrame(nil, TypePing, []byte("hi")))
		n, _ := c.Read(buf)
		got <- append([]byte(nil), buf[:n]...)
	})
	_ = dial(t, addr, "dev", ClientOptions{})
	select {
	case b := <-got:
		f, _, err := ParseFrame(b, 0)
		if err != nil || f.Type != TypePong || string(f.Payload) != "hi" {
			t.Fatalf("answer %x %v", b, err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no PONG")
	}
}

// TestErrKnownWhenMessagesClose: a caller that reads Messages until it is
// closed and then asks Err must get the reason, never nil. Messages used
// to close before the reason was published, and the edgemux binary's
// SIGTERM test saw "<nil>, want GOING_AWAY" now and then.
func TestErrKnownWhenMessagesClose(t *testing.T) {
	for i := range 200 {
		addr := rawServer(t, func(c net.Conn) {
			buf := make([]byte, 256)
			_, _ = c.Read(buf)
			_, _ = c.Write(AppendAck(nil, Ack{Status: CodeOK}))
			_, _ = c.Write(AppendError(nil, CodeGoingAway, "bye"))
		})
		c, err := Dial(context.Background(), addr, "dev", ClientOptions{})
		if err != nil {
			// The ACK and the goodbye can land in one read; Dial may
			// then see the end first, and must say why.
			if !errors.Is(err, CodeGoingAway) {
				t.Fatalf("round %d: Dial: %v, want GOING_AWAY", i, err)
			}
			continue
		}
		for range c.Messages() {
		}
		if !errors.Is(c.Err(), CodeGoingAway) {
			t.Fatalf("round %d: Err %v after Messages closed, want GOING_AWAY", i, c.Err())
		}
		c.Close()
	}
}
