package route

// Profile is what a worker learns about one of its connections from the
// events it serves: its traffic pattern, its event rate, bytes per event
// and the handler time per event, and from them the connection's weight,
// the work the dispatcher counts for it.
//
// Windows are counted in events, not in ticks of a clock (seed 002's bug
// 3: a window of wall time holds two events of a quiet connection and
// thousands of a busy one, so its verdict means a different thing for
// each). Every ProfileWindow events the window closes and the pattern is
// decided from the gaps between those events. Times are the gateway's
// coarse clock in milliseconds (the registry's LastActive and OpenedAt
// unit), compared by difference so the 49-day wrap is harmless.
//
// A Profile belongs to the worker that owns the connection: plain fields,
// no atomics, never shared. The zero value is a connection with nothing
// learned yet (PatternUnknown, weight 1).
type Profile struct {
	last        uint32 // clock (ms) of the latest event; valid when seen
	epochStart  uint32 // clock (ms) where the current rate epoch began
	epochEvents uint32 // events in the current rate epoch
	prevEvents  uint32 // events in the previous rate epoch
	prevMs      uint32 // length of the previous rate epoch, ms
	bytesStart  uint32 // bytes read when the window opened
	costNs      uint32 // sampled handler time per event, smoothed; 0 = none
	samples     uint32 // samples in costNs, up to ProfileMinSamples
	bytesPerEv  uint32 // mean bytes per event of the last full window
	weight      uint32 // work the dispatcher counts; see Weight
	n           uint16 // events in the current window
	dense       uint16 // ... that came within BurstGapMs of the one before
	pattern     Pattern
	seen        bool
}

// Profile limits and thresholds.
const (
	// ProfileWindow is the events per classification window. 16 events
	// give 15 gaps: enough for a majority to mean something, few enough
	// that a Modbus poller (one request a second) is classified in
	// seconds.
	ProfileWindow = 16
	// BurstGapMs: a gap shorter than this is "dense" (back to back). A
	// window whose gaps are mostly dense is bursty: the connection sends
	// trains of events. A sender that never pauses is bursty by this rule
	// too, a burst that does not end; for placement they are alike.
	BurstGapMs = 2
	// LongPeriodMs: a gap of 30 s or more before an event makes a
	// connection that is not bursty long-period (a DTU reporting every
	// half-minute or slower); it is decided at once, since such a sender
	// would need minutes to fill a window.
	LongPeriodMs = 30_000
	// RateEpochEvents is how many events a rate epoch holds; the rate is
	// measured over the current and the previous epoch, so it covers a
	// burst and the pause after it instead of the burst alone.
	RateEpochEvents = 256
	// DefaultEventCostNs is the handler time assumed per event before one
	// is sampled: about what a small request costs end to end here.
	DefaultEventCostNs = 20_000
	// WorkUnitUs is one unit of weight: 1 ms of handler time per second
	// (0.1 % of a core). Every connection weighs at least one unit.
	WorkUnitUs = 1000
	// MaxWeight bounds one connection's weight (65 cores' worth).
	MaxWeight = 1 << 16
	// ProfileMinSamples: a connection's own handler time is trusted from
	// this many samples on; before, the worker's average for all its
	// connections stands in (a few samples of one connection are noise).
	ProfileMinSamples = 8
)

// Pattern is the connection's traffic pattern as learned so far.
func (p *Profile) Pattern() Pattern { return p.pattern }

// Weight is the connection's work in WorkUnitUs units: 1 + its event rate
// times its handler time per event, at least 1 and at most MaxWeight.
func (p *Profile) Weight() uint32 { return max(p.weight, 1) }

// CostNs is the smoothed sampled handler time per event, 0 before any
// sample.
func (p *Profile) CostNs() uint32 { return p.costNs }

// BytesPerEvent is the mean input per event over the last full window.
func (p *Profile) BytesPerEvent() uint32 { return p.bytesPerEv }

// Seed starts a profile from a class remembered for the connection's
// source (the History): it is placed and weighed as that class until its
// own events say otherwise.
func (p *Profile) Seed(pattern Pattern, weight uint32) {
	if pattern < numPatterns {
		p.pattern = pattern
	}
	p.weight = min(max(weight, 1), MaxWeight)
}

// Sample records one timed event's handler time. The caller times a
// fraction of the connection's events (say 1 in 16) to keep the clock
// reads cheap.
func (p *Profile) Sample(ns uint64) {
	p.costNs = SmoothCost(p.costNs, ns)
	p.samples = min(p.samples+1, ProfileMinSamples)
}

// SmoothCost folds one sampled handler time into a smoothed one (0: none
// yet): an average weighing the new sample 1/8, with the sample capped at
// four times the average so that one event that lost its core to another
// process (preempted mid-handler) does not swing the estimate.
func SmoothCost(avg uint32, ns uint64) uint32 {
	ns = min(ns, 1<<31)
	if avg == 0 {
		return uint32(ns)
	}
	ns = min(ns, 4*uint64(avg))
	return uint32((uint64(avg)*7 + ns) / 8)
}

// Event records one event taken at now (ms) with bytesIn the connection's
// running byte count (wrapping); workerCostNs is the owner's smoothed
// handler time per event over all its connections (0: none yet), used
// until the connection has enough samples of its own. It reports whether
// the pattern or the weight changed, so the owner tells the dispatcher
// only then.
func (p *Profile) Event(now, bytesIn, workerCostNs uint32) bool {
	if !p.seen {
		p.seen = true
		p.last, p.epochStart, p.bytesStart = now, now, bytesIn
		p.n, p.epochEvents = 1, 1
		return false
	}
	gap := now - p.last
	p.last = now
	p.n++
	p.epochEvents++
	if gap < BurstGapMs {
		p.dense++
	}
	if p.epochEvents >= RateEpochEvents {
		p.prevEvents, p.prevMs = p.epochEvents, now-p.epochStart
		p.epochStart, p.epochEvents = now, 0
	}
	if gap >= LongPeriodMs && p.pattern != PatternBursty {
		return p.set(PatternLongPeriod, p.weigh(now, workerCostNs))
	}
	if p.n < ProfileWindow {
		return false
	}
	return p.closeWindow(now, bytesIn, workerCostNs)
}

// closeWindow decides the pattern of the window that just filled and
// starts the next one.
func (p *Profile) closeWindow(now, bytesIn, workerCostNs uint32) bool {
	pat := PatternSteady
	// n events have n-1 gaps; bursty when most of them are dense.
	if uint32(p.dense)*2 > uint32(p.n-1) {
		pat = PatternBursty
	} else if p.pattern == PatternLongPeriod && p.dense == 0 {
		// Sixteen events without one short gap do not unmake a
		// long-period sender that was polled a few times in a row.
		pat = PatternLongPeriod
	}
	p.bytesPerEv = (bytesIn - p.bytesStart) / uint32(p.n)
	p.bytesStart = bytesIn
	p.n, p.dense = 0, 0
	return p.set(pat, p.weigh(now, workerCostNs))
}

// weigh is 1 + rate (events/s, over this and the last epoch) times cost
// (µs per event: its own once sampled enough, else the worker's, else
// DefaultEventCostNs), in WorkUnitUs.
func (p *Profile) weigh(now, workerCostNs uint32) uint32 {
	events := uint64(p.prevEvents) + uint64(p.epochEvents)
	ms := max(uint64(p.prevMs)+uint64(now-p.epochStart), 1)
	cost := uint64(workerCostNs)
	if p.samples >= ProfileMinSamples || cost == 0 {
		cost = uint64(p.costNs)
	}
	if cost == 0 {
		cost = DefaultEventCostNs
	}
	// events*1000/ms events/s * cost/1000 µs = events*cost/ms µs/s.
	w := 1 + events*cost/ms/WorkUnitUs
	return uint32(min(w, MaxWeight))
}

func (p *Profile) set(pat Pattern, w uint32) bool {
	changed := pat != p.pattern || w != p.weight
	p.pattern, p.weight = pat, w
	return changed
}
