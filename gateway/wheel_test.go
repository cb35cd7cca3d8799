package gateway

import (
	"slices"
	"testing"
	"time"
	"unsafe"
)

func TestWheelFiresInOrderAndOnlyWhenDue(t *testing.T) {
	w := newWheel(8, 0)
	w.add(1, 3, timerSniff)
	w.add(2, 3+8, timerSniff) // same bucket, one turn later
	w.add(3, 0, timerIdle)    // past: fires at the next advance
	var fired []uint64
	fire := func(e timer) { fired = append(fired, e.id) }
	w.advance(1, fire)
	if !slices.Equal(fired, []uint64{3}) {
		t.Fatalf("tick 1 fired %v", fired)
	}
	w.advance(3, fire)
	if !slices.Equal(fired, []uint64{3, 1}) {
		t.Fatalf("tick 3 fired %v", fired)
	}
	if w.len() != 1 {
		t.Fatalf("len = %d, want 1", w.len())
	}
	w.advance(100, fire) // a jump past a whole turn still fires it
	if !slices.Equal(fired, []uint64{3, 1, 2}) || w.len() != 0 {
		t.Fatalf("after jump fired %v len %d", fired, w.len())
	}
}

func TestWheelFireMayReschedule(t *testing.T) {
	w := newWheel(4, 0)
	w.add(7, 1, timerIdle)
	n := 0
	for tick := uint64(1); tick <= 20; tick++ {
		w.advance(tick, func(e timer) {
			n++
			if n < 5 {
				w.add(e.id, tick+1, e.kind) // into the bucket being walked
			}
		})
	}
	if n != 5 || w.len() != 0 {
		t.Fatalf("fired %d times, len %d; want 5, 0", n, w.len())
	}
}

// TestTimerIs16Bytes: every idle connection holds two or three wheel
// entries; they stay 16 bytes (24 before due became 32-bit).
func TestTimerIs16Bytes(t *testing.T) {
	if size := unsafe.Sizeof(timer{}); size > 16 {
		t.Fatalf("timer is %d bytes, want at most 16", size)
	}
}

// TestWheelDueAcrossTickWrap: a due tick past 2^32 ticks (its low 32 bits
// wrapped to small numbers) fires when due, not at once or never.
func TestWheelDueAcrossTickWrap(t *testing.T) {
	start := uint64(1)<<32 - 2
	w := newWheel(8, start)
	w.add(1, start+5, timerIdle) // low bits 3: numerically below start's
	var fired []uint64
	fire := func(e timer) { fired = append(fired, e.id) }
	for tick := start + 1; tick < start+5; tick++ {
		if w.advance(tick, fire); len(fired) != 0 {
			t.Fatalf("fired at tick %d, due at %d", tick, start+5)
		}
	}
	w.advance(start+5, fire)
	if !slices.Equal(fired, []uint64{1}) || w.len() != 0 {
		t.Fatalf("at the due tick fired %v, len %d", fired, w.len())
	}
}

// TestSetTimerLeavesNoStaleEntry: a session timer that is cancelled or
// replaced leaves the worker's wheel, so an idle private connection
// (HELLO timer cancelled at HELLO) holds no entry for it. Counted by the
// wheel's entries, and the replacing timer still fires once.
func TestSetTimerLeavesNoStaleEntry(t *testing.T) {
	w := &worker{wheel: newWheel(idleWheelBuckets, 0)}
	conns := make([]*conn, 64)
	for i := range conns {
		conns[i] = &conn{w: w, fd: int32(i + 3), gen: 1}
		conns[i].SetTimer(10 * time.Second)
	}
	for _, c := range conns {
		c.SetTimer(0) // HELLO arrived: cancelled
	}
	if n := w.wheel.len(); n != 0 {
		t.Fatalf("after cancelling every timer the wheel holds %d entries, want 0", n)
	}
	c := conns[0]
	c.SetTimer(10 * time.Second)
	c.SetTimer(20 * time.Second) // replaced
	if n := w.wheel.len(); n != 1 {
		t.Fatalf("after replacing a timer the wheel holds %d entries, want 1", n)
	}
	fired := 0
	for tick := uint64(1); tick <= 400; tick++ {
		w.wheel.advance(tick, func(e timer) {
			if e.id != c.id() || e.kind != timerSession || e.due != c.timerDue {
				t.Fatalf("tick %d fired %+v, not the replacing timer (due %d)", tick, e, c.timerDue)
			}
			fired++
		})
	}
	if fired != 1 || w.wheel.len() != 0 {
		t.Fatalf("fired %d times, %d entries left; want 1, 0", fired, w.wheel.len())
	}
}

// TestWheelRemove: remove takes out only the named entry, once.
func TestWheelRemove(t *testing.T) {
	w := newWheel(8, 0)
	w.add(1, 3, timerSession)
	w.add(2, 3, timerSession)
	w.add(1, 3, timerIdle)
	if !w.remove(1, 3, timerSession) || w.remove(1, 3, timerSession) || w.remove(2, 11, timerSession) {
		t.Fatal("remove found an entry that is not there, or missed one that is")
	}
	var fired []timer
	w.advance(3, func(e timer) { fired = append(fired, e) })
	if len(fired) != 2 || w.len() != 0 {
		t.Fatalf("fired %+v, len %d; want the two others, 0", fired, w.len())
	}
	for _, e := range fired {
		if e.id == 1 && e.kind == timerSession {
			t.Fatalf("the removed entry fired: %+v", fired)
		}
	}
}

// TestWheelReusesBuckets: a loop's sniff wheel takes a burst of accepts per
// tick and fires them a few ticks later. Once it has run a turn, that
// allocates nothing: walked buckets' storage serves the next adds. (A
// bucket that grew past 64 entries used to be dropped after its walk and
// grown again by doubling, garbage every time.)
func TestWheelReusesBuckets(t *testing.T) {
	w := newWheel(16, 0)
	tick := uint64(0)
	burst := func() {
		tick++
		for i := range 500 {
			w.add(uint64(i), tick+3, timerSniff)
		}
		w.advance(tick, func(timer) {})
	}
	for range 32 { // warm up: a full turn
		burst()
	}
	if allocs := testing.AllocsPerRun(50, burst); allocs != 0 {
		t.Fatalf("a burst of 500 entries allocates %.1f times, want 0", allocs)
	}
	if w.len() != 3*500 {
		t.Fatalf("len = %d, want %d", w.len(), 3*500)
	}
}

// TestWheelUnusedHoldsNoBuckets: a wheel nothing was added to holds no
// bucket array through advances and removes, and works as any other from
// its first add, at the tick it was advanced to.
func TestWheelUnusedHoldsNoBuckets(t *testing.T) {
	w := newWheel(idleWheelBuckets, 5)
	w.advance(9000, func(e timer) { t.Fatalf("an empty wheel fired %+v", e) })
	if w.remove(1, 9001, timerIdle) {
		t.Fatal("removed an entry from an empty wheel")
	}
	if w.buckets != nil {
		t.Fatalf("an unused wheel holds %d buckets", len(w.buckets))
	}
	w.add(7, 9002, timerIdle)
	w.add(8, 100, timerIdle) // past: due at the next tick
	var fired []uint64
	w.advance(9001, func(e timer) { fired = append(fired, e.id) })
	w.advance(9002, func(e timer) { fired = append(fired, e.id) })
	if len(fired) != 2 || fired[0] != 8 || fired[1] != 7 {
		t.Fatalf("fired %v, want [8 7]", fired)
	}
}
