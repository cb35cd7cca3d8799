package gateway

import (
	"testing"
	"time"

	"github.com/edgemux/edgemux/registry"
)

// TestWakeOncePerBatch: the loop hands a parked worker a batch of events
// and wakes it once, at the end of the batch, not at the first event (a
// worker woken then takes that one, parks again and is woken by the next).
// Nothing is woken while the batch is being routed; afterwards the worker
// takes every event of it.
func TestWakeOncePerBatch(t *testing.T) {
	const batch = 32
	bed := newStageBed(t, batch, nil)
	pk := bed.w.park
	for round := range 5 {
		rbEventually(t, "the worker parks", time.Minute, pk.Parked)
		wakes := pk.Stats().Wakes
		for i := range batch {
			c := &bed.conns[i]
			bed.l.deliver(c.fd, c.gen, c.slot, registry.EvRead)
		}
		if got := pk.Stats().Wakes - wakes; got != 0 {
			t.Fatalf("round %d: %d wakes while the batch was routed, want none before its end", round, got)
		}
		bed.handed += batch
		bed.endBatch()
		rbEventually(t, "the worker takes the batch", time.Minute, func() bool { return bed.w.served.Load() >= bed.handed })
		if got := pk.Stats().Wakes - wakes; got > 1 {
			t.Fatalf("round %d: %d wakes for one batch, want at most one", round, got)
		}
	}
}
