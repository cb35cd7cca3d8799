package gateway

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
)

// heavyCost is what each message of a heavy device costs its worker in
// these tests (testHookData): a handler that takes milliseconds, as a
// write-through to a slow device does.
const heavyCost = 2 * time.Millisecond

// slowFrom makes every Data call of a connection from one of addrs take
// heavyCost, until the test ends (after its gateway stopped: register
// it before startGateway, cleanups run last-in first-out).
func slowFrom(t *testing.T, addrs ...string) {
	heavy := map[netip.Addr]bool{}
	for _, a := range addrs {
		heavy[netip.MustParseAddr(a)] = true
	}
	testHookData = func(c *conn) {
		if heavy[c.Peer().Addr()] {
			time.Sleep(heavyCost)
		}
	}
	t.Cleanup(func() { testHookData = nil })
}

// pingUntil pings c back to back until stop closes, counting the round
// trips in n; it reports the first error on errs.
func pingUntil(c *private.Client, stop <-chan struct{}, n *atomic.Int64, wg *sync.WaitGroup, errs chan<- error) {
	defer wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if err := c.Ping(ctx); err != nil {
			select {
			case errs <- err:
			default:
			}
			return
		}
		n.Add(1)
	}
}

// singleWorkerPool is the test config with one private-pool worker under
// entropy (two loops, as testConfig has).
func singleWorkerPool(t *testing.T) *Gateway {
	cfg := testConfig(t)
	cfg.Dispatch.Policy = "entropy"
	pc := cfg.Pools["private"]
	pc.Workers, pc.Pattern = 1, ""
	cfg.Pools["private"] = pc
	return startGateway(t, cfg, Options{})
}

// TestQuietBesideHeavyWeighsItsOwnCost: a quiet device sharing a worker
// with a heavy one is weighed at its own handler time, not the worker's
// average. Fails before timing one event in 16 of each connection: with
// one event in 64 of the worker timed, neither device had the samples of
// its own a weight needs and both were weighed at the worker's average:
// the quiet one 587-925 against the heavy one's 572-657, or both small
// (the average's first samples the quiet one's). Now the heavy one
// weighs 570-950, the quiet one 9-40.
func TestQuietBesideHeavyWeighsItsOwnCost(t *testing.T) {
	const heavy, quiet = "127.0.0.2", "127.0.0.3"
	slowFrom(t, heavy)
	g := singleWorkerPool(t)
	p := g.byPool["private"]

	h := placementClient(t, g, heavy)
	stop, errs := make(chan struct{}), make(chan error, 1)
	var wg sync.WaitGroup
	var heavyPings atomic.Int64
	wg.Add(1)
	go pingUntil(h, stop, &heavyPings, &wg, errs)
	q := placementClient(t, g, quiet)
	// Each device needs a weight's worth of samples of its own (8, one
	// in 16 events): the quiet one 320 round trips, the heavy one 200.
	for i := 0; i < 320 || heavyPings.Load() < 200; i++ {
		ping(t, q, 1) // each waits behind a heavy message or so
	}
	q.Close()
	stopPingers(t, stop, &wg, errs)
	h.Close()

	weightOf := func(from string) uint32 {
		var w uint32
		eventually(t, "the history of "+from, func() bool {
			var ok bool
			_, w, ok = p.history.Lookup(netip.MustParseAddr(from))
			return ok
		})
		return w
	}
	qw, hw := weightOf(quiet), weightOf(heavy)
	t.Logf("weights: quiet %d, heavy %d (%d heavy pings)", qw, hw, heavyPings.Load())
	if 4*qw >= hw {
		t.Fatalf("quiet device weighs %d, the heavy one %d: want the quiet one under a quarter", qw, hw)
	}
}

// loopOf is the loop that owns the live connection from the address from.
func loopOf(t *testing.T, g *Gateway, from string) int {
	t.Helper()
	for _, v := range g.reg.Snapshot(nil, 1<<20) {
		if ap, err := netip.ParseAddrPort(v.Peer); err == nil && ap.Addr().String() == from && v.State == "active" {
			return v.Loop
		}
	}
	t.Fatalf("no active connection from %s", from)
	return -1
}

// TestRingTurnServesOtherLoops: two heavy devices of one loop keep that
// loop's ring to their worker from emptying (each one's next message
// lands while the other's is served); a device of the other loop on the
// same worker must still be served between their messages, not after
// hundreds of them. Counted, not timed: the heavy devices' round trips
// while the bystander makes 20. Fails before a worker's turn took only
// what a ring held when the turn began (it popped until the ring was
// empty, up to 256 events).
func TestRingTurnServesOtherLoops(t *testing.T) {
	const heavy1 = "127.0.0.2"
	candidates := []string{"127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7", "127.0.0.8",
		"127.0.0.9", "127.0.0.10", "127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"}
	slowFrom(t, append([]string{heavy1}, candidates...)...)
	g := singleWorkerPool(t)

	h1 := placementClient(t, g, heavy1)
	ping(t, h1, 1)
	loop := loopOf(t, g, heavy1)
	// Another heavy device on heavy1's loop and a bystander on the other,
	// the bystander from an address whose messages are not slow.
	var h2 *private.Client
	for _, from := range candidates {
		c := placementClient(t, g, from)
		ping(t, c, 1)
		if loopOf(t, g, from) == loop {
			h2 = c
			break
		}
		c.Close()
	}
	if h2 == nil {
		t.Fatalf("no connection of %d landed on loop %d", len(candidates), loop)
	}
	var bystander *private.Client
	for i := range 12 {
		from := netip.AddrFrom4([4]byte{127, 0, 1, byte(i + 1)}).String()
		c := placementClient(t, g, from)
		ping(t, c, 1)
		if loopOf(t, g, from) != loop {
			bystander = c
			break
		}
		c.Close()
	}
	if bystander == nil {
		t.Fatalf("no bystander landed off loop %d", loop)
	}

	stop, errs := make(chan struct{}), make(chan error, 2)
	var wg sync.WaitGroup
	var heavyPings atomic.Int64
	wg.Add(2)
	go pingUntil(h1, stop, &heavyPings, &wg, errs)
	go pingUntil(h2, stop, &heavyPings, &wg, errs)
	eventually(t, "both heavy devices under way", func() bool { return heavyPings.Load() >= 8 })
	before := heavyPings.Load()
	const rounds = 20
	ping(t, bystander, rounds)
	during := heavyPings.Load() - before
	stopPingers(t, stop, &wg, errs)
	t.Logf("%d heavy round trips during the bystander's %d", during, rounds)
	// Fair turns: a couple of heavy messages ahead of each bystander
	// ping, a few more while its client sends the next one.
	if during > 16*rounds {
		t.Fatalf("%d heavy round trips while the bystander made %d: it waited behind their ring", during, rounds)
	}
}

// stopPingers stops the pingUntil goroutines and fails the test with the
// first error one of them met.
func stopPingers(t *testing.T, stop chan struct{}, wg *sync.WaitGroup, errs <-chan error) {
	t.Helper()
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
