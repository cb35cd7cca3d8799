package gateway

import (
	"time"

	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/route"
)

// placement is what a worker learns of one of its connections for the
// dispatcher: its profile, and the weight the dispatcher counts for it.
//
// It lives in the worker's places table (fd-indexed, as its conns), not
// in the conn: every idle connection carries a conn, which stays in its
// 80-byte size class, while a placement (about 64 bytes) is made only for
// a connection that came with a history or has spoken placeAfter events.
// The table (fdTable) holds pages of pointers only where the worker has
// had connections; it was a map, whose lookup per event took 2.7 % of the
// user-space cycles of the 1k/1k 1 KiB echo.
type placement struct {
	prof     route.Profile
	weight   uint32        // what the dispatcher counts for the connection now
	placedAs route.Pattern // the class it was picked as, for the release
	slow     bool          // its last sample took dispatch.lend_below or more (counted in the worker's slowConns)
}

// placeAfter is how many events a connection without history takes
// before it gets a placement: a device that says hello and goes quiet
// (most idle ones) never costs one; its first events are not profiled,
// which a window of ProfileWindow events does not miss.
const placeAfter = 4

// seed starts c's placement from what the loop picked it as (the seed
// bits of its EvOpen event: its source's history). Inline connections
// (no worker of a pool) are not placed.
func (w *worker) seed(c *conn, bits uint32) {
	if w.local < 0 {
		return
	}
	// A placement left by an fd's earlier connection (one that ended
	// without release, as at a worker's stop) must not be counted again.
	w.places.set(int(c.fd), nil)
	pat, weight := seedOf(bits)
	if pat == w.pool.pattern && weight <= 1 {
		return // no history: placed as the pool's hint, as is the default
	}
	pl := &placement{weight: weight, placedAs: pat}
	pl.prof.Seed(pat, weight)
	w.places.set(int(c.fd), pl)
}

// learn feeds the event just served into c's profile and, when its class
// or weight changed, into the dispatcher; and marks c's class in the
// worker's window bitmap.
func (w *worker) learn(c *conn, s *registry.Slot, now uint32) {
	if w.local < 0 {
		return
	}
	p := w.pool
	pl := w.places.get(int(c.fd))
	if pl == nil && s.Events() >= placeAfter {
		pl = &placement{weight: 1, placedAs: p.pattern}
		w.places.set(int(c.fd), pl)
	}
	pat := route.PatternUnknown
	if pl != nil {
		if pl.prof.Event(now, s.BytesIn(), w.costNs) {
			weight := pl.prof.Weight()
			p.disp.Reweigh(w.local, pl.weight, weight)
			pl.weight = weight
		}
		pat = pl.prof.Pattern()
	}
	if pat == route.PatternUnknown {
		pat = p.pattern
	}
	p.disp.Observe(w.local, p.protoBit(c.proto), pat)
}

// sample records one timed event of c: the worker's average and c's own
// profile if it has one.
func (w *worker) sample(c *conn, ns uint64) {
	w.costNs = route.SmoothCost(w.costNs, ns)
	slow := time.Duration(ns) >= w.g.cfg.Dispatch.LendBelow
	if pl := w.places.get(int(c.fd)); pl != nil {
		pl.prof.Sample(ns)
		w.markSlow(pl, slow)
	}
	if slow {
		w.lendHold = lendHoldSamples
	} else if w.lendHold > 0 {
		w.lendHold--
	}
	w.updateLendable()
}

// markSlow records whether pl's connection's last sample was too slow to
// be lent, and keeps the worker's count of such connections.
func (w *worker) markSlow(pl *placement, slow bool) {
	switch {
	case slow && !pl.slow:
		w.slowConns++
	case !slow && pl.slow:
		w.slowConns--
	}
	pl.slow = slow
}

// updateLendable says whether a loop may run this worker's turn (lend):
// its average cost per event is under dispatch.lend_below, none of its
// connections' last sample was over it, and no sample was over it lately
// (a connection that is not profiled yet). The average alone would not
// do: it clips each sample to four times itself, so one slow connection
// among cheap ones barely moves it, and each of its events would hold
// the loop. Never for quarantine or pinned workers.
func (w *worker) updateLendable() {
	limit := w.g.cfg.Dispatch.LendBelow
	w.lendable.Store(!w.g.cfg.PinCPUs && !w.pool.quarantine && w.slowConns == 0 && w.lendHold == 0 &&
		time.Duration(w.costNs) < limit)
}

// unplace uncounts c from the dispatcher and remembers in the pool's
// history what its source turned out to be, for its next connection.
func (w *worker) unplace(c *conn) {
	if w.local < 0 {
		return
	}
	p := w.pool
	weight, placedAs := uint32(1), p.pattern
	if pl := w.places.get(int(c.fd)); pl != nil {
		weight, placedAs = pl.weight, pl.placedAs
		p.history.Record(c.Peer().Addr(), pl.prof.Pattern(), pl.prof.Weight())
		w.markSlow(pl, false)
		w.updateLendable()
		w.places.set(int(c.fd), nil)
	}
	p.disp.ReleaseWeighted(w.local, p.protoBit(c.proto), placedAs, weight)
}
