package gateway

// The datagram path under floods, through real sockets: more datagrams
// than a socket buffer holds, and more than a loop reads in one wakeup.
// Every datagram sent is accounted for (handled, dropped by the gateway
// with a reason, or dropped by the kernel), and none is corrupted or
// reordered. These are the race tests of the path's two handshakes: the
// loop coming back to an edge-triggered socket it has not drained, and
// batch buffers going back from the worker to the loop.

import (
	"net"
	"sync"
	"testing"
)

// holdUDPDrain makes the first drain of a UDP socket wait until release;
// entered is closed when a loop waits there. It must be called before the
// gateway starts; the hook goes when the test ends.
func holdUDPDrain(t *testing.T) (entered <-chan struct{}, release func()) {
	t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	var once sync.Once
	testHookUDPDrain = func() {
		once.Do(func() {
			close(in)
			<-out
		})
	}
	var released sync.Once
	release = func() { released.Do(func() { close(out) }) }
	t.Cleanup(func() { testHookUDPDrain = nil }) // after the gateway's own cleanup: Run has returned
	t.Cleanup(release)
	return in, release
}

// flood sends n test datagrams of size bytes, round robin over peers,
// each peer numbering its own from next[i]+1 on.
func flood(t *testing.T, peers []*net.UDPConn, next []uint32, n, size int) {
	t.Helper()
	buf := make([]byte, size)
	for k := range n {
		i := k % len(peers)
		next[i]++
		if _, err := peers[i].Write(dgFrame(buf, uint64(i), next[i], size)); err != nil {
			t.Fatal(err)
		}
	}
}

// accounted waits until every datagram sent is handled or counted as
// dropped, by the gateway or by the kernel, and returns the counts.
func accounted(t *testing.T, g *Gateway, h *dgHandler, sent int) (udpCounts, dgSeen) {
	t.Helper()
	var c udpCounts
	var s dgSeen
	eventually(t, "every datagram handled or counted as dropped", func() bool {
		c, s = countsOf(g), h.seen()
		return uint64(s.handled)+c.dropped+c.kernel == uint64(sent)
	})
	for _, p := range s.problems {
		t.Error(p)
	}
	return c, s
}

// TestUDPFloodBeyondTheSocketBuffer: while the loop is held, 12,000
// datagrams arrive on a socket that holds about 3,300: the kernel drops
// the rest and counts them (edgemux_udp_kernel_drops_total). Released,
// the loop reads what the socket holds, more than two wakeups' worth
// (udpPerWakeup each): the edge raised while it was held brings it back
// once, after that it must come back for the rest on its own, since the
// edge-triggered socket raises no new edge. Without that, the rest stays
// in the socket and the accounting never adds up.
func TestUDPFloodBeyondTheSocketBuffer(t *testing.T) {
	const peers, total, size = 8, 12000, 200
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			entered, release := holdUDPDrain(t)
			cfg := dgConfig(t, policy, 2)
			cfg.UDP.Sockets = 1 // one socket: every datagram waits behind the held loop
			cfg.UDP.ReadBuffer = 2 << 20
			h := &dgHandler{}
			g := dgStart(t, cfg, h)
			var conns []*net.UDPConn
			for range peers {
				conns = append(conns, dgClient(t, g))
			}
			next := make([]uint32, peers)
			flood(t, conns, next, 1, size)
			<-entered
			flood(t, conns, next, total-1, size)
			// Hangs (and fails) if the socket held them all: the flood
			// must overflow it.
			eventually(t, "the kernel dropping datagrams", func() bool { return countsOf(g).kernel > 0 })
			release()
			c, s := accounted(t, g, h, total)
			if s.handled <= 2*udpPerWakeup {
				t.Fatalf("test setup: only %d datagrams waited in the socket; the test needs more than two wakeups' %d", s.handled, 2*udpPerWakeup)
			}
			m := httpGet(t, g, "/metrics")
			if got := metricSum(t, m, "edgemux_udp_kernel_drops_total"); got != float64(c.kernel) || got == 0 {
				t.Errorf("edgemux_udp_kernel_drops_total = %v, want %d (> 0)", got, c.kernel)
			}
			t.Logf("%d sent: %d handled, %d dropped by the kernel, %d by the gateway %v", total, s.handled, c.kernel, c.dropped, c.drops)
		})
	}
}

// TestDatagramBatchesComeBack: the only worker is held in its first
// Datagrams call while a flood larger than the socket buffer arrives, so
// the loops fill every batch of their lanes (udp.queue 2) and drop the
// rest (queue_full). Released, the worker hands every batch back: all of
// the flood is accounted for, and then datagrams sent a window at a time
// are all handled, none dropped. A batch that never came back, or one
// reused while the worker still read it, fails one or the other.
func TestDatagramBatchesComeBack(t *testing.T) {
	const peers, total, size, windows, window = 8, 6000, 200, 20, 50
	for _, policy := range []string{"entropy", "roundrobin"} { // inline: the loop itself handles each batch at once
		t.Run(policy, func(t *testing.T) {
			cfg := dgConfig(t, policy, 1)
			cfg.UDP.Queue = 2
			cfg.UDP.ReadBuffer = 256 << 10
			h := &dgHandler{hold: make(chan struct{}), held: make(chan struct{})}
			g := dgStart(t, cfg, h)
			var conns []*net.UDPConn
			for range peers {
				conns = append(conns, dgClient(t, g))
			}
			next := make([]uint32, peers)
			flood(t, conns, next, 1, size)
			<-h.held
			flood(t, conns, next, total-1, size)
			eventually(t, "the lanes full", func() bool { return countsOf(g).drops[dropQueueFull] > 0 })
			close(h.hold)
			c, s := accounted(t, g, h, total)
			t.Logf("flood of %d: %d handled, %d dropped by the kernel, %d by the gateway %v", total, s.handled, c.kernel, c.dropped, c.drops)
			sent := total
			for range windows {
				flood(t, conns, next, window, size)
				sent += window
				eventually(t, "the window handled", func() bool { return h.seen().handled == s.handled+sent-total })
			}
			if after := countsOf(g); after.dropped != c.dropped || after.kernel != c.kernel {
				t.Errorf("windows after the flood lost datagrams: drops %v kernel %d, were %v %d", after.drops, after.kernel, c.drops, c.kernel)
			}
			for _, p := range h.seen().problems {
				t.Error(p)
			}
		})
	}
}
