package gateway

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols"
)

// echoDgram is a minimal datagram handler: one worker, which sends every
// datagram back to its peer.
type echoDgram struct{}

func (echoDgram) Route(netip.AddrPort, []byte, int) int { return 0 }
func (echoDgram) Worker(_, _ int, out protocols.DatagramOut) protocols.DatagramWorker {
	return echoDgramWorker{out}
}

type echoDgramWorker struct{ out protocols.DatagramOut }

func (w echoDgramWorker) Datagrams(batch []protocols.Datagram, _ time.Time) {
	for _, d := range batch {
		w.out.Send(d.Peer, d.Data)
	}
}
func (echoDgramWorker) Tick(time.Time) time.Duration { return 0 }
func (echoDgramWorker) Close()                       {}

// dgramBed is a Gateway built by New with one loop opened and wired to the
// rudp pool's only worker as Run wires them (connect, startUDP), neither
// goroutine running: the test calls the loop's and the worker's functions
// in their place.
type dgramBed struct {
	g    *Gateway
	l    *loop
	w    *worker
	addr netip.AddrPort // the shared port
}

func newDgramBed(t *testing.T, h protocols.DatagramHandler) *dgramBed {
	t.Helper()
	cfg := dgConfig(t, "entropy", 1)
	cfg.Loops = 1
	g, err := New(cfg, Options{DatagramHandlers: map[string]protocols.DatagramHandler{"rudp": h}})
	if err != nil {
		t.Fatal(err)
	}
	b := &dgramBed{g: g, l: newLoop(g, 0), w: g.byPool["rudp"].workers[0]}
	g.loops = append(g.loops, b.l)
	addr, err := b.l.open(netip.MustParseAddrPort(cfg.Listen))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.connect(b.l); err != nil {
		t.Fatal(err)
	}
	b.addr = addr
	if err := g.startUDP(addr); err != nil {
		t.Fatal(err)
	}
	b.w.dg.open(0, 1, newDgramOut(g, g.udp[0]))
	t.Cleanup(func() {
		b.w.dg.close()
		b.l.closeFDs()
		b.l.closeEpoll()
		g.udp[0].close()
	})
	return b
}

// TestDatagramPathDoesNotAllocate: the whole datagram path, from the
// loop's recvmmsg through classification, Route, the lane and the ring to
// the worker's handler call, and back out through Send and sendmmsg,
// allocates nothing per datagram once the lane's batches and the sender's
// buffers exist.
func TestDatagramPathDoesNotAllocate(t *testing.T) {
	const n = 16
	b := newDgramBed(t, echoDgram{})
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	out, in := make([]byte, 256), make([]byte, 256)
	seq := uint32(0)
	round := func() {
		for range n {
			seq++
			c.Write(dgFrame(out, 1, seq, 120))
		}
		for got := 0; got < n; {
			b.l.drainUDP()
			b.w.poll()
			for got < n {
				if _, err := c.Read(in); err != nil {
					t.Fatal(err)
				}
				got++
			}
		}
	}
	if allocs := testing.AllocsPerRun(200, round); allocs != 0 {
		t.Errorf("%v allocations per %d datagrams there and back, want 0", allocs, n)
	}
	if got := b.g.udpStats.sent.Load(); got != uint64(seq) {
		t.Errorf("%d echoed of %d", got, seq)
	}
}
