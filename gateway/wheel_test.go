package gateway

import (
	"slices"
	"testing"
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
