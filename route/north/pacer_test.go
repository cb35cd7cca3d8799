package north

import (
	"testing"
	"time"
)

// fakeClock is a clock that moves only when a pacer waits on it.
type fakeClock struct {
	t     time.Time
	reads int
	waits []time.Duration
}

func (c *fakeClock) now() time.Time { c.reads++; return c.t }

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	c.waits = append(c.waits, d)
	c.t = c.t.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.t
	return ch
}

func pacerOn(c *fakeClock, perSecond int) *pacer {
	p := newPacer(perSecond)
	p.now, p.after = c.now, c.after
	return p
}

// TestPacerHoldsTheRate: a second's events go at once, the next ones one
// every 1/rate, and an idle spell earns back at most a second's worth.
func TestPacerHoldsTheRate(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	p := pacerOn(c, 100)
	for i := range 100 {
		if !p.wait(nil) {
			t.Fatal("stopped")
		}
		if len(c.waits) != 0 {
			t.Fatalf("event %d waited: the first second's events go at once", i)
		}
	}
	if c.reads != 1 {
		t.Fatalf("%d clock reads for a second's burst, want 1", c.reads)
	}
	start := c.t
	for range 50 {
		p.wait(nil)
	}
	if got := c.t.Sub(start); got != 500*time.Millisecond {
		t.Fatalf("50 events past the burst took %v, want 500ms at 100/s", got)
	}
	c.t = c.t.Add(time.Hour) // idle: the bucket refills to one second, not an hour
	c.waits = nil
	for range 100 {
		p.wait(nil)
	}
	if len(c.waits) != 0 {
		t.Fatalf("waited %v within the refilled second", c.waits)
	}
	p.wait(nil)
	if len(c.waits) != 1 || c.waits[0] != 10*time.Millisecond {
		t.Fatalf("the 101st event after idling waited %v, want one 10ms wait", c.waits)
	}
}

// TestPacerStops: a stop ends a wait.
func TestPacerStops(t *testing.T) {
	p := newPacer(1)
	if !p.wait(nil) {
		t.Fatal("the first event waited")
	}
	stop := make(chan struct{})
	close(stop)
	if p.wait(stop) {
		t.Fatal("the second event went at 1/s within the second")
	}
}
