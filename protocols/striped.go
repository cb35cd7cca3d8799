package protocols

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// counterStripes is how many cells a StripedCounter spreads its adds
// over: two sessions served on different cores at once share a cell once
// in counterStripes.
const counterStripes = 16

// StripedCounter is a statistic that sessions on every core add to at
// once: the messages a handler published or delivered, say. A single
// atomic word that every worker writes per message moves between the
// cores' caches on each add; a StripedCounter keeps a word per stripe,
// each a cache line away from the next, and a session adds to its own
// stripe. Load sums the stripes, which suits what it is read for, a stats
// snapshot. The zero StripedCounter is ready to use.
type StripedCounter struct {
	cells [counterStripes]struct {
		n atomic.Uint64
		_ cpu.CacheLinePad
	}
}

// Stripe is the cell of a StripedCounter that a session adds to.
type Stripe uint8

// StripeFor hands out stripes round-robin by a session's number (a count
// of sessions opened, say), so that sessions spread over all cells.
func StripeFor(n uint64) Stripe { return Stripe(n % counterStripes) }

// Add adds n to the count through stripe s.
func (c *StripedCounter) Add(s Stripe, n uint64) { c.cells[s%counterStripes].n.Add(n) }

// Load returns the count.
func (c *StripedCounter) Load() uint64 {
	var sum uint64
	for i := range c.cells {
		sum += c.cells[i].n.Load()
	}
	return sum
}
