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
	"github.com/edgemux/edgemux/route"
	"github.com/edgemux/edgemux/sniff"
)

// lentTurns is what the gateway's workers' parkers counted as lent.
func lentTurns(g *Gateway) uint64 {
	var n uint64
	for _, w := range g.workers {
		if pk, ok := w.park.(*route.Parker); ok {
			n += pk.Stats().Lends
		}
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
					t.Fatalf("message %d: %v (lent turns so far: %d)", i, err, lentTurns(g))
				}
				m, err := private.DecodePub(f.Payload)
				if err != nil {
					t.Fatal(err)
				}
				if err := checkRoundPayload(m.Data, 0, i); err != nil {
					t.Fatal(err)
				}
			}
			lent := lentTurns(g)
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

// A slow sample stops lending for the worker: at once, for as long as
// the connection's last sample stays slow (its own events would hold
// the loop, and the worker's average, which clips each sample to four
// times itself, barely moves for one slow connection among cheap ones),
// for lendHoldSamples after a slow sample of a connection not profiled
// yet, and not a moment longer once the slow connection is gone.
func TestSlowSampleStopsLending(t *testing.T) {
	g, err := New(testConfig(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := g.byPool["private"].workers[0]
	peer := netip.MustParseAddrPort("127.0.0.2:40000")
	profiled := func(fd int) *conn {
		c := newConn(w, fd, 1, peer, sniff.Private, 0)
		w.places.set(fd, &placement{weight: 1, placedAs: w.pool.pattern})
		return c
	}
	cheap, slow := uint64(5*time.Microsecond), uint64(5*time.Millisecond)
	lendable := func(when string, want bool) {
		t.Helper()
		if got := w.lendable.Load(); got != want {
			t.Fatalf("%s: lendable %v, want %v (slow connections %d, hold %d, cost %d ns)",
				when, got, want, w.slowConns, w.lendHold, w.costNs)
		}
	}
	a, b := profiled(7), profiled(8)
	w.sample(a, cheap)
	lendable("after a cheap sample", true)
	w.sample(a, slow)
	lendable("after a slow one", false)
	for range 2 * lendHoldSamples {
		w.sample(b, cheap)
	}
	lendable("with another connection's cheap samples while a's last was slow", false)
	w.sample(a, cheap)
	lendable("once a's last sample is cheap again", true)

	w.sample(a, slow)
	w.unplace(a)
	for range lendHoldSamples {
		w.sample(b, cheap)
	}
	lendable("after the slow connection left and the hold passed", true)

	unprofiled := newConn(w, 9, 1, peer, sniff.Private, 0)
	w.sample(unprofiled, slow)
	for range lendHoldSamples - 1 {
		w.sample(b, cheap)
	}
	lendable("within the hold after an unprofiled connection's slow sample", false)
	w.sample(b, cheap)
	lendable("after the hold", true)
}

// TestSlowNewcomerStopsLending: on one private worker made lendable by a
// cheap device's pings, a device whose handler takes milliseconds turns
// lending off with its first message, not with the sixteenth (the first
// a connection's one-in-16 sampling would time): its events must not
// hold a loop. Real sockets, one worker, two loops, entropy.
func TestSlowNewcomerStopsLending(t *testing.T) {
	const cheapSrc, slowSrc = "127.0.0.3", "127.0.0.2"
	slowFrom(t, slowSrc)
	cfg := testConfig(t)
	cfg.Dispatch.Policy = "entropy"
	pc := cfg.Pools["private"]
	pc.Workers, pc.Pattern = 1, ""
	cfg.Pools["private"] = pc
	// Between a cheap ping (tens of us, more under -race, whose one slow
	// sample would hold lending off for 64) and the slow device's 2 ms.
	cfg.Dispatch.LendBelow = time.Millisecond
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
	// The HELLO was slow too (every Data call of the source is), and its
	// sample may land after the ACK the client waits for.
	eventually(t, "the slow device's first message to stop lending", func() bool { return !w.lendable.Load() })
	if err := rbPingPong(slow, 1); err != nil {
		t.Fatal(err)
	}
	if w.lendable.Load() {
		t.Fatal("lendable again after the slow device's second message")
	}
}
