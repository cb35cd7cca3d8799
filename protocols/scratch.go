package protocols

import (
	"sync"

	"golang.org/x/sys/cpu"
)

// Scratch is a pool of slices for per-call scratch space (output staging,
// drained bus messages): a session takes one for the length of a call and
// gives it back, so idle connections hold none. Slices grown past Max are
// dropped on Put, so one burst does not pin memory, and Put clears the
// elements first, so a pooled slice pins nothing its elements pointed to.
// The zero value works (Min 0, Max 0 keeps nothing); safe for concurrent
// use.
type Scratch[T any] struct {
	Min  int // capacity of a new slice
	Max  int // largest capacity kept for reuse
	pool sync.Pool
}

// Get returns an empty slice with room for at least n elements.
func (s *Scratch[T]) Get(n int) *[]T {
	if p, ok := s.pool.Get().(*[]T); ok && cap(*p) >= n {
		return p
	}
	b := &paddedSlice[T]{s: make([]T, 0, max(n, s.Min))}
	return &b.s
}

// paddedSlice is a pooled slice's header with a cache line after it. The
// header is written on every Get and Put, by whichever worker holds it;
// unpadded, headers of different workers' buffers sat side by side in one
// line, which then moved between their cores on every message.
type paddedSlice[T any] struct {
	s []T
	_ cpu.CacheLinePad
}

// Put gives p back for reuse.
func (s *Scratch[T]) Put(p *[]T) {
	if p == nil || cap(*p) > s.Max {
		return
	}
	clear(*p)
	*p = (*p)[:0]
	s.pool.Put(p)
}
