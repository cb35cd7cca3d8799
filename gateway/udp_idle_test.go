package gateway

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleGatewaySleeps: a gateway with nothing to do (its UDP path used
// once, then quiet; no connection, no deadline) wakes its loops and
// workers about once a second each (quietWait), not on every 100 ms
// tick. It counts parks, not time: over a quiet window it allows each
// goroutine two wakes per quietWait of wall time plus two, which a loop
// or worker still stepping by 100 ms exceeds fivefold (a slow machine
// only makes the wakes fewer). A datagram after the window is still
// handled: the long sleep ends on the socket's event.
func TestIdleGatewaySleeps(t *testing.T) {
	var loopParks atomic.Int64
	testHookPark = func() { loopParks.Add(1) }
	t.Cleanup(func() { testHookPark = nil })
	cfg := dgConfig(t, "entropy", 2)
	h := &dgHandler{}
	g := dgStart(t, cfg, h)
	c := dgClient(t, g)
	buf := make([]byte, 64)
	send := func(seq uint32) {
		if _, err := c.Write(dgFrame(buf, 7, seq, 64)); err != nil {
			t.Fatal(err)
		}
	}
	send(1)
	eventually(t, "the first datagram handled", func() bool { return h.seen().handled == 1 })

	workerParks := func() uint64 {
		var n uint64
		for _, w := range g.workers {
			n += w.park.Stats().Parks
		}
		return n
	}
	// Let the wakes that follow the datagram (the handler's Tick, the
	// loop's publish) pass before counting.
	time.Sleep(quietWait)
	l0, w0, t0 := loopParks.Load(), workerParks(), time.Now()
	time.Sleep(3 * quietWait)
	loops, workers, elapsed := loopParks.Load()-l0, workerParks()-w0, time.Since(t0)
	allowed := func(goroutines int) int64 {
		return int64(goroutines) * (2*int64(elapsed/quietWait) + 2)
	}
	t.Logf("over %v: %d loop parks (%d loops), %d worker parks (%d workers)", elapsed, loops, len(g.loops), workers, len(g.workers))
	if loops > allowed(len(g.loops)) {
		t.Errorf("the idle loops parked %d times in %v; want at most %d", loops, elapsed, allowed(len(g.loops)))
	}
	if workers > uint64(allowed(len(g.workers))) {
		t.Errorf("the idle workers parked %d times in %v; want at most %d", workers, elapsed, allowed(len(g.workers)))
	}
	send(2)
	eventually(t, "a datagram after the quiet window handled", func() bool { return h.seen().handled == 2 })
	if s := h.seen(); len(s.problems) > 0 {
		t.Fatalf("problems: %v", s.problems)
	}
}
