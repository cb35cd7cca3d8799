package gateway

// Lent turns (worker.lend): a loop that finds a cheap worker asleep runs
// its turn itself. The write path's handshake (arm the EPOLLOUT wish, then
// flush once more) then runs on the loop's goroutine, and the edges that
// move a large output along come back to a loop that may lend again.

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/sniff"
)

// lentTurns is what the gateway's stats (/api/stats, and per worker on
// /metrics) say its workers' turns were lent, checked against the
// parkers' own counts.
func lentTurns(t *testing.T, g *Gateway) uint64 {
	t.Helper()
	var n, parked uint64
	for _, w := range g.Snapshot().Workers {
		n += w.Lent
	}
	for _, w := range g.workers {
		parked += w.park.Stats().Lends
	}
	// Read after the stats: a turn lent in between only adds.
	if parked < n {
		t.Fatalf("stats say %d turns lent, the parkers %d", n, parked)
	}
	return n
}

// TestLentTurnsDeliverWhole: one message at a time, each many times a
// small socket's buffer, to a reader that reads it all before the next is
// published. Between messages the workers sleep, so the publish and the
// EPOLLOUT edges find them asleep and their loop lends itself their
// turns. Every message arrives whole and in order under every policy;
// the ring policies lent turns, inline (no rings, no sleeping workers)
// none.
func TestLentTurnsDeliverWhole(t *testing.T) {
	messages := 200
	if testing.Short() {
		messages = 50
	}
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			cfg := largeOutputConfig(t, policy)
			cfg.Dispatch.LendBelow = 10 * time.Millisecond // the race detector's slower turns still qualify
			g := startGateway(t, cfg, Options{})
			addr := g.Addr().String()
			sub := privateSubscriber(t, addr, "reader", true)
			pub := bigPublisher(t, addr)
			for i := range messages {
				if err := rbWrite(pub, rbPubFrame(0, "big/"+strconv.Itoa(i%8), roundPayload(0, i))); err != nil {
					t.Fatal(err)
				}
				f, err := rbReadFrame(sub)
				if err != nil {
					t.Fatalf("message %d: %v (lent turns so far: %d)", i, err, lentTurns(t, g))
				}
				m, err := private.DecodePub(f.Payload)
				if err != nil {
					t.Fatal(err)
				}
				if err := checkRoundPayload(m.Data, 0, i); err != nil {
					t.Fatal(err)
				}
			}
			lent := lentTurns(t, g)
			t.Logf("%d turns lent for %d messages", lent, messages)
			switch {
			case policy == "inline" && lent != 0:
				t.Fatalf("inline lent %d turns", lent)
			case policy != "inline" && lent == 0:
				t.Fatal("no turn was lent: the path under test did not run")
			}
		})
	}
}

// Two slow samples in a row of one connection stop lending for its
// worker, for as long as that connection's last sample stays slow (its
// own events would hold the loop, and the worker's average, which clips
// each sample to four times itself, barely moves for one slow connection
// among cheap ones) and not a moment longer once it is gone. One slow
// sample alone (a cheap handler's thread preempted) does not stop it, and
// it has the connection's next event timed, so that the next one decides.
func TestSlowSampleStopsLending(t *testing.T) {
	g, err := New(testConfig(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := g.byPool["private"].workers[0]
	peer := netip.MustParseAddrPort("127.0.0.2:40000")
	open := func(fd int, profiled bool) *conn {
		c := newConn(w, fd, 1, peer, sniff.Private, 0)
		w.fds.setConn(fd, c)
		if profiled {
			w.fds.setPlace(fd, &placement{weight: 1, placedAs: w.pool.pattern})
		}
		return c
	}
	cheap, slow := uint64(5*time.Microsecond), uint64(5*time.Millisecond)
	lendable := func(when string, want bool) {
		t.Helper()
		if got := w.lendable.Load(); got != want {
			t.Fatalf("%s: lendable %v, want %v (slow connections %d, cost %d ns)",
				when, got, want, w.slowConns, w.costNs)
		}
	}
	a, b, fresh := open(7, true), open(8, true), open(9, false)
	// Cheap samples bring the worker's average, which slow ones raise,
	// back under the limit: what is asserted here is the marks.
	settle := func() {
		for range 64 {
			w.sample(b, cheap)
		}
	}
	w.sample(a, cheap)
	lendable("after a cheap sample", true)
	if w.timeEvent(a, sampleEvery+1) {
		t.Fatal("a cheap connection's 17th event is timed")
	}
	w.sample(a, slow)
	lendable("after one slow sample", true)
	if !w.timeEvent(a, sampleEvery+1) {
		t.Fatal("the event after a slow sample is not timed")
	}
	w.sample(a, slow)
	lendable("after two slow samples in a row", false)
	for range 100 {
		w.sample(b, cheap)
	}
	lendable("with another connection's cheap samples while a's last was slow", false)
	w.sample(a, cheap)
	lendable("once a's last sample is cheap again", true)

	// Slow samples of different connections, or not in a row, are
	// one-offs.
	for _, c := range []*conn{a, b, fresh, a, b, fresh} {
		w.sample(c, slow)
		w.sample(c, cheap)
	}
	settle()
	w.sample(a, slow)
	w.sample(b, slow)
	lendable("after one-off slow samples", true)
	w.sample(a, cheap)
	w.sample(b, cheap)

	// A connection not placed yet is judged as well. One strike costs it
	// no placement (the worker holds it); two make one. Its release
	// forgets it, and nothing marks it again once released.
	if w.fds.place(9) != nil {
		t.Fatal("the one-off slow samples gave a connection not placed yet a placement")
	}
	w.sample(fresh, slow)
	if w.fds.place(9) != nil || !w.timeEvent(fresh, 3) {
		t.Fatal("one strike: want no placement and the next event timed")
	}
	w.sample(fresh, slow)
	lendable("after a new connection's two slow samples", false)
	fresh.release()
	settle()
	lendable("after the slow connection left", true)
	w.sample(fresh, slow)
	w.sample(fresh, slow)
	settle()
	lendable("after samples of a released connection", true)
	if w.slowConns != 0 || w.struck != 0 || w.suspect != 0 {
		t.Fatalf("%d connections marked slow, %d struck, suspect %x: want none", w.slowConns, w.struck, w.suspect)
	}
}

// With lend_below 0s nothing is lent, so nothing is judged: a slow
// newcomer gets no placement for it.
func TestNoStrikesWithoutLending(t *testing.T) {
	cfg := testConfig(t)
	cfg.Dispatch.LendBelow = 0
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := g.byPool["private"].workers[0]
	c := newConn(w, 7, 1, netip.MustParseAddrPort("127.0.0.2:40000"), sniff.Private, 0)
	w.fds.setConn(7, c)
	for range 3 {
		w.sample(c, uint64(5*time.Millisecond))
	}
	if w.lendable.Load() || w.fds.place(7) != nil || w.suspect != 0 || w.slowConns != 0 {
		t.Fatalf("lend_below 0s: lendable %v, placement %v, suspect %x, slow connections %d",
			w.lendable.Load(), w.fds.place(7) != nil, w.suspect, w.slowConns)
	}
}

// TestSlowNewcomerStopsLending: on one private worker made lendable by a
// cheap device's pings, a device whose handler takes milliseconds turns
// lending off with its second event (HELLO, then its first message), not
// with the sixteenth (the first a connection's one-in-16 sampling would
// time): its events must not hold a loop. Real sockets, one worker, two
// loops, entropy.
func TestSlowNewcomerStopsLending(t *testing.T) {
	const cheapSrc, slowSrc = "127.0.0.3", "127.0.0.2"
	slowFrom(t, slowSrc)
	cfg := testConfig(t)
	cfg.Dispatch.Policy = "entropy"
	pc := cfg.Pools["private"]
	pc.Workers, pc.Pattern = 1, ""
	cfg.Pools["private"] = pc
	// Strikes at four times the limit, 1.6 ms: between a cheap ping
	// (tens of us, hundreds now and then under -race) and the slow
	// device's 2 ms (heavyCost).
	cfg.Dispatch.LendBelow = 400 * time.Microsecond
	g := startGateway(t, cfg, Options{})
	w := g.byPool["private"].workers[0]
	addr := g.Addr().String()
	cheap, err := rbHelloConn(addr, netip.MustParseAddr(cheapSrc), "cheap")
	if err != nil {
		t.Fatal(err)
	}
	defer cheap.Close()
	for i := uint64(0); !w.lendable.Load(); i++ {
		if i > 10_000 {
			t.Fatal("cheap pings never made the worker lendable")
		}
		if err := rbPingPong(cheap, i); err != nil {
			t.Fatal(err)
		}
	}
	slow, err := rbHelloConn(addr, netip.MustParseAddr(slowSrc), "slow")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// The HELLO was slow too (every Data call of the source is): one
	// strike. The first message is the second; its sample may land
	// after the PONG the client waits for.
	if err := rbPingPong(slow, 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the slow device's first message to stop lending", func() bool { return !w.lendable.Load() })
	if err := rbPingPong(slow, 2); err != nil {
		t.Fatal(err)
	}
	if w.lendable.Load() {
		t.Fatal("lendable again after the slow device's second message")
	}
}
