package gateway

// The test bed of the stage benchmarks that cross goroutines (enqueue,
// wake): the gateway's own loop and worker code, without the network.

import (
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/route"
	"github.com/edgemux/edgemux/route/routetest"
	"github.com/edgemux/edgemux/sniff"
)

// stageBed is a Gateway built by New (which starts nothing) with one loop
// opened and given its rings by g.connect, as startLoops does, and the
// private pool's only worker running its real goroutine (w.start). Its
// connections are socketpairs that the loop admitted (l.admit) and handed
// to the worker (l.handOff), as it does an accepted, classified
// connection; the test holds the other end of each. The loop's own
// goroutine does not run: the test calls the loop's functions in its
// place, so it can time them.
type stageBed struct {
	g     *Gateway
	l     *loop
	w     *worker
	conns []stageConn
	seen  *stageSeen
	// handed is how many events the loop handed to the worker, the open
	// events included; the worker's served count catches up with it.
	handed uint64
}

// stageConn is one connection of the bed.
type stageConn struct {
	fd   int // the gateway's end
	peer int // the test's end
	gen  uint32
	slot *registry.Slot
}

// stageSeen is what the bed's sessions saw, read by the test while the
// worker writes it.
type stageSeen struct {
	base   time.Time
	opened atomic.Int64
	data   atomic.Int64 // Data calls
	last   atomic.Int64 // time.Since(base) at the last Data call, ns
}

// stageHandler replaces the private protocol's handler in the bed: its
// sessions record when the worker fed them and consume everything.
type stageHandler struct{ seen *stageSeen }

func (h stageHandler) Open(protocols.Conn) (protocols.Session, error) {
	h.seen.opened.Add(1)
	return stageSession(h), nil
}

type stageSession struct{ seen *stageSeen }

func (s stageSession) Data(in []byte) (int, error) {
	s.seen.last.Store(int64(time.Since(s.seen.base)))
	s.seen.data.Add(1)
	return len(in), nil
}

func (s stageSession) Closed(error) {}

// newStageBed builds a bed with n connections. sleeper, when not nil,
// replaces the worker's Parker with one sleeping on it (same spin);
// otherwise the worker keeps the one newWorker gave it.
func newStageBed(tb testing.TB, n int, sleeper route.Sleeper) *stageBed {
	tb.Helper()
	return newStageBedWith(tb, n, sleeper, nil)
}

// newStageBedWith is newStageBed with the default configuration changed
// by adjust first (when not nil).
func newStageBedWith(tb testing.TB, n int, sleeper route.Sleeper, adjust func(*config.Config)) *stageBed {
	tb.Helper()
	cfg, err := config.Parse(config.DefaultYAML)
	if err != nil {
		tb.Fatal(err)
	}
	if adjust != nil {
		adjust(&cfg)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.Loops = 1
	cfg.UDP.Enabled = false // the bed wires TCP only (the private pool would take rudp datagrams)
	pc := cfg.Pools["private"]
	pc.Workers = 1
	cfg.Pools["private"] = pc
	seen := &stageSeen{base: time.Now()}
	g, err := New(cfg, Options{Handlers: map[string]protocols.Handler{"private": stageHandler{seen}}})
	if err != nil {
		tb.Fatal(err)
	}
	b := &stageBed{g: g, l: newLoop(g, 0), w: g.byPool["private"].workers[0], seen: seen}
	g.loops = append(g.loops, b.l)
	if _, err := b.l.open(netip.MustParseAddrPort(cfg.Listen)); err != nil {
		tb.Fatal(err)
	}
	if err := g.connect(b.l); err != nil {
		tb.Fatal(err)
	}
	if sleeper != nil {
		pk := route.NewParkerWith(cfg.Dispatch.Spin, sleeper)
		b.w.park, b.w.wake = pk, pk.Unpark
	}
	b.w.start()
	tb.Cleanup(b.close)
	for i := range n {
		b.conns = append(b.conns, b.admit(tb, i))
	}
	b.handed = uint64(n)
	stageWait(tb, "sessions opened", func() bool {
		return seen.opened.Load() == int64(n) && b.w.served.Load() == b.handed
	})
	return b
}

// admit makes connection i: the loop admits one end of a socketpair and
// hands it over, and the worker opens its session.
func (b *stageBed) admit(tb testing.TB, i int) stageConn {
	tb.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	fd, peer := fds[0], fds[1]
	rt := b.g.rt.Load()
	b.l.admit(rt, fd, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 2}), uint16(40000+i)))
	s := b.g.reg.Slot(fd)
	if s == nil || s.State() != registry.Sniffing {
		unix.Close(peer)
		tb.Fatalf("connection %d (fd %d) was not admitted", i, fd)
	}
	gen := s.Gen()
	b.l.handOff(fd, gen, s, b.w.pool, sniff.Private, protocols.ReasonNone, false)
	b.l.wakeMarked()
	if s.State() != registry.Active || s.Worker() != b.w.idx {
		unix.Close(peer)
		tb.Fatalf("connection %d: state %v worker %d after handOff, want active on %d", i, s.State(), s.Worker(), b.w.idx)
	}
	return stageConn{fd: fd, peer: peer, gen: gen, slot: s}
}

// endBatch is what loop.run does after a batch of events besides waiting
// in epoll: push what waited for ring space, and yield once if it woke a
// worker (the woken goroutine is queued on this P; see loop.run).
func (b *stageBed) endBatch() {
	b.l.wakeMarked()
	b.l.flushBacklog()
	if b.l.woke {
		b.l.woke = false
		runtime.Gosched()
	}
}

// close stops the worker (it closes the bed's connections) and the loop's
// descriptors, then the test's ends.
func (b *stageBed) close() {
	b.w.stop()
	<-b.w.done
	b.l.closeFDs()
	b.w.park.Close()
	for _, c := range b.conns {
		unix.Close(c.peer)
	}
}

// parked reports whether the worker is asleep in its Parker.
func (b *stageBed) parked() bool { return b.w.park.Parked() }

// stageWait polls cond until it holds; the limit is a hang guard, not a
// performance assertion.
func stageWait(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	routetest.Eventually(tb, what, cond)
}
