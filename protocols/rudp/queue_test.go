package rudp

import "testing"

// TestDatagramQueue: FIFO across growth and wrap-around, bounded, and
// an empty queue gives its ring back.
func TestDatagramQueue(t *testing.T) {
	var q dgramQueue
	next, want := 0, 0
	for round := 0; round < 50; round++ {
		for k := 0; k < round%7+1; k++ {
			if q.push([]byte{byte(next)}, 10) {
				next++
			} else if q.size != 10 {
				t.Fatalf("refused at %d of 10", q.size)
			}
		}
		for k := 0; k < round%5 && q.size > 0; k++ {
			if b := q.pop(); b[0] != byte(want) {
				t.Fatalf("got %d, want %d", b[0], want)
			}
			want++
		}
		if len(q.bufs) > 10 {
			t.Fatalf("ring of %d for a limit of 10", len(q.bufs))
		}
	}
	for q.size > 0 {
		if b := q.pop(); b[0] != byte(want) {
			t.Fatalf("got %d, want %d", b[0], want)
		}
		want++
	}
	q.shrink()
	if q.bufs != nil || want != next {
		t.Fatalf("%d popped of %d; ring %v", want, next, q.bufs)
	}
}
