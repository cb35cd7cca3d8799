package gateway

import (
	"testing"
	"time"
)

// TestReceiveModerationBatches: a steady stream of datagrams, one every
// 200 µs (or what the machine makes of it) from one peer, reaches the
// handler in one or two batches per receive_delay (20 ms here) under
// receive moderation, where before each datagram came alone (a loop
// woken per datagram, so a Datagrams call each). It counts Datagrams
// calls against the moderation windows the stream spanned: at most three
// calls a window plus slack, which a call per datagram exceeds several
// times over however slow the machine (slowness spaces the datagrams
// further, and more of them come alone). Every datagram arrives once and
// in order (the dgWorker checks), and after the stream a lone datagram
// is still handed on: a dry poll put the socket back in epoll.
func TestReceiveModerationBatches(t *testing.T) {
	const delay = 20 * time.Millisecond
	cfg := dgConfig(t, "entropy", 1)
	cfg.UDP.ReceiveDelay = delay
	cfg.UDP.Batch = 128 // a window's datagrams in one recvmmsg
	h := &dgHandler{}
	g := dgStart(t, cfg, h)
	c := dgClient(t, g)
	buf := make([]byte, 64)
	const stream = 1000
	start := time.Now()
	for seq := uint32(1); seq <= stream; seq++ {
		if _, err := c.Write(dgFrame(buf, 7, seq, 64)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	eventually(t, "the stream handled", func() bool { return h.seen().handled == stream })
	windows := int(time.Since(start)/delay) + 2
	s := h.seen()
	t.Logf("%d datagrams in %d Datagrams calls over %d windows of %v", s.handled, s.calls, windows, delay)
	if s.calls > 3*windows {
		t.Errorf("%d datagrams came in %d Datagrams calls; want at most %d (3 per window of %v)", s.handled, s.calls, 3*windows, delay)
	}
	// Past the stream the socket goes back to epoll: wait for that (a
	// poll that finds nothing), then a lone datagram must still come.
	eventually(t, "the socket back in epoll", func() bool { return !udpPolled(g) })
	if _, err := c.Write(dgFrame(buf, 7, stream+1, 64)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a lone datagram after the stream handled", func() bool { return h.seen().handled == stream+1 })
	if s := h.seen(); len(s.problems) > 0 {
		t.Fatalf("problems: %v", s.problems)
	}
	if d := countsOf(g).dropped; d != 0 {
		t.Fatalf("%d datagrams dropped", d)
	}
}

// udpPolled reports whether a loop's socket is out of epoll, polled.
func udpPolled(g *Gateway) bool {
	for _, u := range g.udp {
		if u.polled.Load() {
			return true
		}
	}
	return false
}
