package route

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/edgemux/edgemux/registry/offheap"
)

// Ring capacity limits. The upper limit keeps a misconfigured ring_size
// from reserving gigabytes: with one ring per (loop, worker) pair the
// memory multiplies quickly.
const (
	MinRingCapacity = 2
	MaxRingCapacity = 1 << 20
)

// cacheLine is the coherence granule we pad to. 64 bytes on amd64 and
// most arm64 parts.
const cacheLine = 64

// ErrRingCapacity is returned by NewRing for a capacity that is not a
// power of two in MinRingCapacity..MaxRingCapacity.
var ErrRingCapacity = errors.New("route: ring capacity must be a power of two in 2..1048576")

// Ring is a bounded single-producer single-consumer queue of uint64 events.
//
// Exactly one goroutine may call Push and exactly one (possibly another)
// may call Pop; Len and Cap are safe from anywhere. The consumer's index
// (head) and the producer's index (tail) live on separate cache lines, and
// each side keeps a private copy of the other side's index that it only
// refreshes when the ring looks full (producer) or empty (consumer), so in
// the steady state neither side reads the other's cache line on every
// operation.
//
// The three groups of fields below are kept a whole cache line apart, so
// no line ever holds two of them wherever the allocator places the ring:
// on 64-bit targets it lands on a 64-byte boundary, but on 32-bit ones an
// object with pointers this large gets an 8-byte allocation header and
// starts at any multiple of 8 (a layout that relied on alignment put head
// and tail on one line there). Use NewRing; the zero value is not usable.
type Ring struct {
	// Read-only after NewRing.
	buf  []uint64
	mask uint64
	_    [cacheLine]byte

	// The consumer's.
	head       atomic.Uint64 // next index to pop; written by the consumer only
	cachedTail uint64        // consumer's last view of tail
	_          [cacheLine]byte

	// The producer's.
	tail       atomic.Uint64 // next index to push; written by the producer only
	cachedHead uint64        // producer's last view of head
	_          [cacheLine]byte
}

// NewRing returns an empty ring holding up to capacity events. capacity
// must be a power of two in MinRingCapacity..MaxRingCapacity.
func NewRing(capacity int) (*Ring, error) {
	if capacity < MinRingCapacity || capacity > MaxRingCapacity || capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("%w: got %d", ErrRingCapacity, capacity)
	}
	// The buffer holds no pointers and lives as long as the ring: outside
	// the Go heap (offheap), the collector's goal does not grow with it.
	r := &Ring{mask: uint64(capacity - 1)}
	r.buf = offheap.Slice[uint64](r, capacity)
	return r, nil
}

// Push appends v and reports whether there was room. Producer only.
func (r *Ring) Push(v uint64) bool {
	t := r.tail.Load()
	if t-r.cachedHead > r.mask {
		// Looks full from our stale view: refresh it once.
		r.cachedHead = r.head.Load()
		if t-r.cachedHead > r.mask {
			return false
		}
	}
	r.buf[t&r.mask] = v
	r.tail.Store(t + 1) // publishes buf[t] to the consumer
	return true
}

// Pop removes and returns the oldest event; ok is false when the ring is
// empty. Consumer only.
func (r *Ring) Pop() (v uint64, ok bool) {
	h := r.head.Load()
	if h == r.cachedTail {
		// Looks empty from our stale view: refresh it once.
		r.cachedTail = r.tail.Load()
		if h == r.cachedTail {
			return 0, false
		}
	}
	v = r.buf[h&r.mask]
	r.head.Store(h + 1) // hands slot h back to the producer
	return v, true
}

// Len is the number of queued events. From a goroutine other than the
// producer and consumer it is a snapshot that may be stale by the time it
// returns (fine for a depth metric, or for a worker's "is there work"
// check, which the Parker protocol re-checks anyway).
func (r *Ring) Len() int {
	// head first: it never passes tail, so tail read afterwards is >= it.
	h := r.head.Load()
	t := r.tail.Load()
	n := t - h
	if n > r.mask+1 { // head was stale while the producer refilled
		n = r.mask + 1
	}
	return int(n)
}

// Cap is the ring's fixed capacity.
func (r *Ring) Cap() int { return int(r.mask + 1) }
