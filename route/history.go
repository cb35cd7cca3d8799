package route

import (
	"net/netip"
	"sync"
	"sync/atomic"
)

// History remembers, per source address, the class and weight its last
// connection ended with, so that a device that reconnects (they do: DTUs
// redial after every modem hiccup) is placed as what it is, not as an
// unknown: a connection's own events say nothing at accept.
//
// It is a bounded LRU: at most the size given to NewHistory entries, the
// least recently placed or recorded one evicted (and counted) when a new
// source needs room. Entries live in one array linked by index, so Lookup
// and Record allocate nothing once the table has grown to its size. It
// grows as sources come, not at start: a table sized for 4,096 sources
// made up front is about half a megabyte (its map's control words written
// at once), in every entropy pool, before any device connects.
//
// One mutex guards it: Lookup runs once per accepted connection and Record
// once per closed one, never per event.
type History struct {
	mu      sync.Mutex
	index   map[netip.Addr]int32
	entries []historyEntry // grows by append up to size, then recycles its least recently used entry
	size    int
	head    int32 // most recently used; -1 when empty
	tail    int32 // least recently used; -1 when empty

	hits, misses, evictions atomic.Uint64
}

type historyEntry struct {
	addr       netip.Addr
	weight     uint32
	pattern    Pattern
	prev, next int32
}

// History limits.
const (
	// DefaultHistory is the table size when 0 is given: 4096 sources at
	// about 120 bytes each (entry and map slot) when full.
	DefaultHistory = 4096
	// MaxHistory bounds it.
	MaxHistory = 1 << 20
)

// NewHistory returns a table of size entries (0 means DefaultHistory,
// more than MaxHistory is MaxHistory; negative means none: NewHistory
// returns nil, and a nil *History remembers nothing).
func NewHistory(size int) *History {
	switch {
	case size < 0:
		return nil
	case size == 0:
		size = DefaultHistory
	}
	size = min(size, MaxHistory)
	return &History{index: make(map[netip.Addr]int32), size: size, head: -1, tail: -1}
}

// Lookup returns what the last connection from addr ended as, or
// (PatternUnknown, 1, false) when the source is not remembered.
func (h *History) Lookup(addr netip.Addr) (Pattern, uint32, bool) {
	if h == nil {
		return PatternUnknown, 1, false
	}
	h.mu.Lock()
	i, ok := h.index[addr]
	if !ok {
		h.mu.Unlock()
		h.misses.Add(1)
		return PatternUnknown, 1, false
	}
	h.touch(i)
	e := h.entries[i]
	h.mu.Unlock()
	h.hits.Add(1)
	return e.pattern, e.weight, true
}

// Record remembers that a connection from addr ended as pattern with
// weight. An unknown pattern is not recorded: a connection that said too
// little leaves the source's earlier verdict standing.
func (h *History) Record(addr netip.Addr, pattern Pattern, weight uint32) {
	if h == nil || pattern == PatternUnknown || pattern >= numPatterns || !addr.IsValid() {
		return
	}
	weight = clampWeight(weight)
	h.mu.Lock()
	defer h.mu.Unlock()
	if i, ok := h.index[addr]; ok {
		h.entries[i].pattern, h.entries[i].weight = pattern, weight
		h.touch(i)
		return
	}
	var i int32
	if len(h.entries) < h.size {
		i = int32(len(h.entries))
		h.entries = append(h.entries, historyEntry{prev: -1, next: -1})
	} else {
		i = h.tail
		h.unlink(i)
		delete(h.index, h.entries[i].addr)
		h.evictions.Add(1)
	}
	h.entries[i] = historyEntry{addr: addr, pattern: pattern, weight: weight, prev: -1, next: -1}
	h.index[addr] = i
	h.pushFront(i)
}

// HistoryStats are the table's counters.
type HistoryStats struct {
	Len                     int
	Hits, Misses, Evictions uint64
}

// Stats returns the counters; zero for a nil table.
func (h *History) Stats() HistoryStats {
	if h == nil {
		return HistoryStats{}
	}
	h.mu.Lock()
	n := len(h.index)
	h.mu.Unlock()
	return HistoryStats{Len: n, Hits: h.hits.Load(), Misses: h.misses.Load(), Evictions: h.evictions.Load()}
}

// touch moves entry i to the front. h.mu is held.
func (h *History) touch(i int32) {
	if h.head == i {
		return
	}
	h.unlink(i)
	h.pushFront(i)
}

func (h *History) unlink(i int32) {
	e := &h.entries[i]
	if e.prev >= 0 {
		h.entries[e.prev].next = e.next
	} else {
		h.head = e.next
	}
	if e.next >= 0 {
		h.entries[e.next].prev = e.prev
	} else {
		h.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (h *History) pushFront(i int32) {
	e := &h.entries[i]
	e.prev, e.next = -1, h.head
	if h.head >= 0 {
		h.entries[h.head].prev = i
	}
	h.head = i
	if h.tail < 0 {
		h.tail = i
	}
}
