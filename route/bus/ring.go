package bus

import (
	"math/bits"
	"sync"
	"unsafe"
)

// Queue storage. A subscriber's queue is a ring of runs (chain.go): each
// entry is 16 bytes and stands for one message, or for consecutive
// messages of one topic that a burst queued: a queued message costs a
// subscriber at most one entry, and a burst to one topic one entry per
// chainBytes of messages (16 KiB). The messages themselves are shared by
// every subscriber of the publish, never copied.
//
// The ring starts at firstRing entries on the first delivery and doubles
// up to the queue's limit in messages, so a quiet subscriber never pays
// for a full queue; Drain gives the emptied ring back, so an idle
// subscriber holds none at all.
//
// Rings are recycled by size up to maxPooledRing entries. This matters
// for memory more than for speed: a subscriber that falls a few hundred
// messages of many topics behind, catches up and falls behind again would
// otherwise allocate its grown ring anew each time (in a private fan-out
// to 1,000 subscribers, before runs, that was 95 % of all allocation). A
// first ring of 2 entries instead of 16 cut the resident memory of 10,000
// idle WebSocket subscribers from 2.0 to 1.2 KB each.
const (
	firstRing     = 2
	maxPooledRing = 1 << (ringPoolCount) // 4,096 entries, 64 KiB
	ringPoolCount = 12                   // pools of 2^1 .. 2^12 entries
)

// run is one queue entry: the messages from first to last of one chain,
// oldest first (first == last for a single message).
type run struct {
	first, last *Message
}

// extendsTo reports whether m comes right after the run in its chain.
func (r *run) extendsTo(m *Message) bool {
	return r.last.ext != nil && r.last.ext.next.Load() == m
}

// ringPools holds empty rings of 2, 4, ... maxPooledRing entries, by
// log2(size)-1, as pointers to their first entry so that pooling them
// does not allocate.
var ringPools [ringPoolCount]sync.Pool

// ringPool returns the pool for rings of size entries, nil if they are
// not pooled (not a power of two from 2 to maxPooledRing).
func ringPool(size int) *sync.Pool {
	if size < 2 || size > maxPooledRing || size&(size-1) != 0 {
		return nil
	}
	return &ringPools[bits.Len(uint(size))-2]
}

// getRing returns an empty ring of size entries.
func getRing(size int) []run {
	if p := ringPool(size); p != nil {
		if first, ok := p.Get().(*run); ok {
			return unsafe.Slice(first, size)
		}
	}
	return make([]run, size)
}

// putRing pools ring if its size is pooled. Its entries must be zero, so
// the pool pins no message.
func putRing(ring []run) {
	if p := ringPool(len(ring)); p != nil {
		p.Put(unsafe.SliceData(ring))
	}
}
