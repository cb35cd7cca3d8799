package upstream

import (
	"testing"
	"time"
)

// TestHealthSaysWhenAndWhether: the health a dashboard shows says when the
// device last answered and whether its last request went unanswered, and
// a failure does not erase when it last answered.
func TestHealthSaysWhenAndWhether(t *testing.T) {
	var h health
	if got := h.snapshot(); !got.LastAnswer.IsZero() || got.Failing {
		t.Fatalf("a device never asked: %+v", got)
	}
	t0 := time.Unix(1700000000, 0)
	h.done(Result{PDU: []byte{3, 2, 0, 1}, RTT: 3 * time.Millisecond}, 3, t0, time.Second)
	if got := h.snapshot(); !got.LastAnswer.Equal(t0) || got.Failing || got.LastRTT != 3*time.Millisecond {
		t.Fatalf("after an answer: %+v", got)
	}
	h.done(Result{Err: ErrTimeout}, 3, t0.Add(time.Second), time.Second)
	if got := h.snapshot(); !got.LastAnswer.Equal(t0) || !got.Failing || got.Demoted {
		t.Fatalf("after one timeout: %+v", got)
	}
	h.done(Result{PDU: []byte{0x83, 2}, RTT: time.Millisecond}, 3, t0.Add(2*time.Second), time.Second)
	if got := h.snapshot(); !got.LastAnswer.Equal(t0.Add(2*time.Second)) || got.Failing || got.Exceptions != 1 {
		t.Fatalf("after an exception answer: %+v", got)
	}
}
