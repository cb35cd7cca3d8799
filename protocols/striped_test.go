package protocols

import (
	"sync"
	"testing"
)

// TestStripedCounterSumsEveryStripe adds from many goroutines through every
// stripe, and some stripes out of range, and checks that Load sees each
// add exactly once.
func TestStripedCounterSumsEveryStripe(t *testing.T) {
	var c StripedCounter
	var wg sync.WaitGroup
	for g := range 40 {
		wg.Go(func() {
			s := StripeFor(uint64(g))
			if g%10 == 0 {
				s = Stripe(200 + g) // past the cells: must wrap, not panic
			}
			for range 1000 {
				c.Add(s, 3)
			}
		})
	}
	wg.Wait()
	if got, want := c.Load(), uint64(40*1000*3); got != want {
		t.Fatalf("Load = %d, want %d", got, want)
	}
}

// TestStripeForSpreads checks that consecutive sessions get distinct
// stripes until every cell is used.
func TestStripeForSpreads(t *testing.T) {
	seen := map[Stripe]bool{}
	for n := range uint64(counterStripes) {
		seen[StripeFor(n+7)] = true
	}
	if len(seen) != counterStripes {
		t.Fatalf("%d sessions in a row got %d distinct stripes, want %d", counterStripes, len(seen), counterStripes)
	}
}
