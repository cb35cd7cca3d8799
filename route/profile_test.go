package route

import "testing"

// feed gives p events at the times in gaps (ms after the one before),
// each with bytesPer bytes, starting at start; it returns the clock.
func feed(p *Profile, start uint32, bytesPer uint32, gaps ...uint32) uint32 {
	now, bytes := start, uint32(0)
	for _, g := range gaps {
		now += g
		bytes += bytesPer
		p.Event(now, bytes, 0)
	}
	return now
}

func repeat(gap uint32, n int) []uint32 {
	gs := make([]uint32, n)
	for i := range gs {
		gs[i] = gap
	}
	return gs
}

func TestProfileClassesOnEventWindows(t *testing.T) {
	tests := []struct {
		name string
		gaps []uint32
		want Pattern
	}{
		{"too few events", repeat(0, ProfileWindow-1), PatternUnknown},
		{"back to back", repeat(0, ProfileWindow), PatternBursty},
		{"one a second", repeat(1000, ProfileWindow), PatternSteady},
		{"ten a second", repeat(100, ProfileWindow), PatternSteady},
		// Trains of 4 events 0 ms apart, 500 ms between trains: 12 of
		// the 15 gaps are dense.
		{"trains", append([]uint32{0}, []uint32{0, 0, 0, 500, 0, 0, 0, 500, 0, 0, 0, 500, 0, 0, 0}...), PatternBursty},
		// Half dense is not a majority.
		{"alternating", []uint32{0, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 100}, PatternSteady},
		{"a gap of 30 s", []uint32{0, LongPeriodMs}, PatternLongPeriod},
		{"a gap just under 30 s", []uint32{0, LongPeriodMs - 1}, PatternUnknown},
	}
	for _, tt := range tests {
		var p Profile
		feed(&p, 5000, 10, tt.gaps...)
		if got := p.Pattern(); got != tt.want {
			t.Errorf("%s: pattern %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The window is counted in events: the same sixteen events classify the
// same whether they took 10 ms or an hour to arrive at a steady pace,
// and a clock that wraps changes nothing.
func TestProfileWindowIsEvents(t *testing.T) {
	for _, start := range []uint32{0, ^uint32(0) - 3000} {
		var fast, slow Profile
		feed(&fast, start, 1, repeat(3, ProfileWindow)...)
		feed(&slow, start, 1, repeat(20_000, ProfileWindow)...)
		if fast.Pattern() != PatternSteady || slow.Pattern() != PatternSteady {
			t.Errorf("start %d: fast %v slow %v, want steady both", start, fast.Pattern(), slow.Pattern())
		}
	}
}

func TestProfileBurstyStaysBurstyAcrossPauses(t *testing.T) {
	var p Profile
	now := feed(&p, 0, 8, repeat(0, ProfileWindow)...)
	// A pause of a minute, then the next train.
	feed(&p, now, 8, append([]uint32{60_000}, repeat(0, ProfileWindow-1)...)...)
	if p.Pattern() != PatternBursty {
		t.Fatalf("pattern %v after a pause between trains, want bursty", p.Pattern())
	}
}

func TestProfileLongPeriodPolledStays(t *testing.T) {
	var p Profile
	now := feed(&p, 0, 8, 0, LongPeriodMs)
	// Polled sixteen times, a second apart: no dense gap, stays.
	feed(&p, now, 8, repeat(1000, ProfileWindow)...)
	if p.Pattern() != PatternLongPeriod {
		t.Fatalf("pattern %v, want long-period", p.Pattern())
	}
	// A real burst does unmake it.
	feed(&p, now, 8, repeat(0, ProfileWindow)...)
	if p.Pattern() != PatternBursty {
		t.Fatalf("pattern %v after a burst, want bursty", p.Pattern())
	}
}

func TestProfileBytesPerEvent(t *testing.T) {
	var p Profile
	feed(&p, 0, 100, repeat(50, ProfileWindow)...)
	// The first event opens the window with its bytes counted already:
	// 15 events' worth of growth over 16 events.
	if got, want := p.BytesPerEvent(), uint32(15*100/ProfileWindow); got != want {
		t.Fatalf("bytes per event %d, want %d", got, want)
	}
}

func TestProfileWeight(t *testing.T) {
	var p Profile
	if p.Weight() != 1 {
		t.Fatalf("zero profile weight %d, want 1", p.Weight())
	}
	// 16 events in 15 ms at 20 µs each: ~21 ms of work per second.
	feed(&p, 0, 1, repeat(1, ProfileWindow)...)
	if w := p.Weight(); w != 1+16*DefaultEventCostNs/15/WorkUnitUs {
		t.Errorf("dense weight %d, want %d", w, 1+16*DefaultEventCostNs/15/WorkUnitUs)
	}
	// Sampled cost replaces the default once there are enough samples:
	// 1 µs per event.
	var q Profile
	for range ProfileMinSamples {
		q.Sample(1000)
	}
	feed(&q, 0, 1, repeat(1, ProfileWindow)...)
	if w := q.Weight(); w != 2 {
		t.Errorf("cheap dense weight %d, want 2", w)
	}
	// Before that the worker's average stands in: 2 µs, over a single
	// sample of 1 ms.
	var u Profile
	u.Sample(1_000_000)
	now := uint32(0)
	for range ProfileWindow {
		now++
		u.Event(now, now, 2000)
	}
	if w := u.Weight(); w != 1+16*2000/15/WorkUnitUs {
		t.Errorf("weight with one own sample %d, want the worker's cost's %d", w, 1+16*2000/15/WorkUnitUs)
	}
	// One event a second weighs the minimum.
	var r Profile
	feed(&r, 0, 1, repeat(1000, ProfileWindow)...)
	if w := r.Weight(); w != 1 {
		t.Errorf("slow weight %d, want 1", w)
	}
}

func TestProfileSampleSmooths(t *testing.T) {
	var p Profile
	p.Sample(800)
	p.Sample(1600)
	if got := p.CostNs(); got != 900 {
		t.Fatalf("cost %d, want 900 (7/8 old + 1/8 new)", got)
	}
	// A preempted event counts as at most four times the average.
	p.Sample(1_000_000)
	if got := p.CostNs(); got != (900*7+3600)/8 {
		t.Fatalf("cost after an outlier %d, want %d", got, (900*7+3600)/8)
	}
}

func TestProfileSeed(t *testing.T) {
	var p Profile
	p.Seed(PatternBursty, 40)
	if p.Pattern() != PatternBursty || p.Weight() != 40 {
		t.Fatalf("seeded %v/%d", p.Pattern(), p.Weight())
	}
	p.Seed(PatternBursty, 1<<30)
	if p.Weight() != MaxWeight {
		t.Fatalf("seed weight not capped: %d", p.Weight())
	}
}

func TestProfileEventAllocs(t *testing.T) {
	var p Profile
	now := uint32(0)
	if n := testing.AllocsPerRun(1000, func() { now++; p.Event(now, now, 0) }); n != 0 {
		t.Fatalf("Event allocates %v", n)
	}
}
