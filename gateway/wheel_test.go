package gateway

import (
	"slices"
	"testing"
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
