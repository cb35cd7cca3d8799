package gateway

import (
	"time"

	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/route"
)

// placement is what a worker learns of one of its connections for the
// dispatcher: its profile, and the weight the dispatcher counts for it.
//
// It hangs off the worker's fd table entry beside the conn (fdTable), not
// inside the conn: every idle connection carries a conn, which stays in
// its 80-byte size class, while a placement (about 64 bytes) is made only
// for a connection that came with a history or has spoken placeAfter
// events. It was a map once, whose lookup per event took 2.7 % of the
// user-space cycles of the 1k/1k 1 KiB echo.
type placement struct {
	prof     route.Profile
	weight   uint32        // what the dispatcher counts for the connection now
	placedAs route.Pattern // the class it was picked as, for the release
	slowRun  uint8         // samples in a row too slow to be lent (judgeSlow)
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
	if old := w.fds.place(int(c.fd)); old != nil {
		w.forgetSlow(old)
		w.fds.setPlace(int(c.fd), nil)
	}
	pat, weight := seedOf(bits)
	if pat == w.pool.pattern && weight <= 1 {
		return // no history: placed as the pool's hint, as is the default
	}
	pl := &placement{weight: weight, placedAs: pat}
	pl.prof.Seed(pat, weight)
	w.fds.setPlace(int(c.fd), pl)
}

// learn feeds the event just served into c's profile and, when its class
// or weight changed, into the dispatcher; and marks c's class in the
// worker's window bitmap.
func (w *worker) learn(c *conn, s *registry.Slot, now uint32) {
	if w.local < 0 {
		return
	}
	p := w.pool
	pl := w.fds.place(int(c.fd))
	if pl == nil && s.Events() >= placeAfter {
		pl = &placement{weight: 1, placedAs: p.pattern}
		w.fds.setPlace(int(c.fd), pl)
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

// sample records one timed event of c: the worker's average, c's own
// profile if it has one, and whether c is too slow to be lent.
func (w *worker) sample(c *conn, ns uint64) {
	w.costNs = route.SmoothCost(w.costNs, ns)
	pl := w.fds.place(int(c.fd))
	if pl != nil {
		pl.prof.Sample(ns)
	}
	// A connection the event released must not be marked again: nothing
	// would unmark it.
	if w.lends() && w.fds.conn(int(c.fd)) == c {
		w.judgeSlow(c, pl, time.Duration(ns) >= slowFactor*w.g.cfg.Dispatch.LendBelow)
	}
	w.updateLendable()
}

// A connection is too slow to be lent (judgeSlow) after slowStrikes
// samples in a row of slowFactor times dispatch.lend_below or more. The
// worker's average must stay under the limit itself; the strikes catch
// one slow connection among cheap ones, which the average (it clips each
// sample to four times itself) barely feels.
//
// One strike is not enough, nor is the limit itself: a 5,000 requests/s
// echo over 1,000 quiet connections (examples/bench/echocompare, open
// loop, 2 cores shared with the load) took 50 us or more in 5 % of its
// samples, 50-400 us nearly all of them (a cold cache after a sleep, the
// peer's TCP input that a loopback write runs), and a connection marked
// by one such sample, until its next sample 16 of its events later, kept
// lending off nearly always: 160-240 of the 16,600 turns that could be
// lent were. Two in a row at the limit: 8,900-11,600 (a marked
// connection's next event comes 200 ms later). Two in a row at four
// times the limit: 15,900. A handler that is slow is slow every time:
// after one strike a connection's events are all timed (timeEvent), so
// its next event confirms or clears it, and a slow newcomer's first two
// events at most run on a loop.
const (
	slowFactor  = 4
	slowStrikes = 2
)

// judgeSlow counts the slow samples in a row of c (pl its placement, nil
// for none yet) and keeps the worker's counts: connections struck at
// least once (struck) and marked too slow (slowConns). The first strike
// of a connection not placed yet is held by the worker (suspect), not by
// a placement made for it: a device whose hello was slow once and that
// then went quiet costs none. At its second it gets its placement, as
// learn would give it later.
func (w *worker) judgeSlow(c *conn, pl *placement, slow bool) {
	switch id := c.id(); {
	case w.suspect == id:
		w.suspect = 0
		if !slow {
			return
		}
		if pl == nil {
			pl = &placement{weight: 1, placedAs: w.pool.pattern}
			w.fds.setPlace(int(c.fd), pl)
		}
		if pl.slowRun == 0 {
			pl.slowRun = 1
			w.struck++
		}
	case pl == nil:
		if slow {
			w.suspect = id
		}
		return
	}
	switch {
	case slow && pl.slowRun < slowStrikes:
		if pl.slowRun == 0 {
			w.struck++
		}
		pl.slowRun++
		if pl.slowRun == slowStrikes {
			w.slowConns++
		}
	case !slow && pl.slowRun > 0:
		w.forgetSlow(pl)
	}
}

// forgetSlow clears pl's strikes: a cheap sample came, or its connection
// is gone.
func (w *worker) forgetSlow(pl *placement) {
	if pl.slowRun == 0 {
		return
	}
	if pl.slowRun == slowStrikes {
		w.slowConns--
	}
	w.struck--
	pl.slowRun = 0
}

// timeEvent says whether c's event number ev is timed: one in
// sampleEvery, every one of its first sampleEvery (a slow newcomer must
// stop lent turns at its first events, not at its sixteenth; a suspect,
// not placed yet, is among them), and every one after a strike
// (judgeSlow: the next decides). The placement is looked up only while
// some connection of the worker is struck.
func (w *worker) timeEvent(c *conn, ev uint32) bool {
	if ev%sampleEvery == 0 || ev < sampleEvery {
		return true
	}
	if w.struck == 0 {
		return false
	}
	pl := w.fds.place(int(c.fd))
	return pl != nil && pl.slowRun > 0
}

// updateLendable says whether a loop may run this worker's turn (lend):
// its average cost per event is under dispatch.lend_below and none of its
// connections is marked slow (judgeSlow). The average alone would not do:
// it clips each sample to four times itself, so one slow connection among
// cheap ones barely moves it, and each of its events would hold the loop.
// Never for quarantine or pinned workers.
func (w *worker) updateLendable() {
	w.lendable.Store(w.lends() && w.slowConns == 0 && time.Duration(w.costNs) < w.g.cfg.Dispatch.LendBelow)
}

// lends says whether this worker's turns may ever be lent: not inline
// (local < 0), quarantine or pinned workers, nor with lend_below 0s.
func (w *worker) lends() bool {
	return w.local >= 0 && !w.pool.quarantine && !w.g.cfg.PinCPUs && w.g.cfg.Dispatch.LendBelow > 0
}

// unplace uncounts c from the dispatcher and remembers in the pool's
// history what its source turned out to be, for its next connection.
func (w *worker) unplace(c *conn) {
	if w.local < 0 {
		return
	}
	if w.suspect == c.id() {
		w.suspect = 0
	}
	p := w.pool
	weight, placedAs := uint32(1), p.pattern
	if pl := w.fds.place(int(c.fd)); pl != nil {
		weight, placedAs = pl.weight, pl.placedAs
		p.history.Record(c.Peer().Addr(), pl.prof.Pattern(), pl.prof.Weight())
		if pl.slowRun > 0 {
			w.forgetSlow(pl)
			w.updateLendable()
		}
		w.fds.setPlace(int(c.fd), nil)
	}
	p.disp.ReleaseWeighted(w.local, p.protoBit(c.proto), placedAs, weight)
}
