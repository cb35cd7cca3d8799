package route

import (
	"net/netip"
	"runtime"
	"testing"
)

func addr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }

func TestHistoryRemembersAndEvictsLeastRecent(t *testing.T) {
	h := NewHistory(3)
	if _, _, ok := h.Lookup(addr(1)); ok {
		t.Fatal("empty table remembers")
	}
	h.Record(addr(1), PatternBursty, 20)
	h.Record(addr(2), PatternSteady, 1)
	h.Record(addr(3), PatternLongPeriod, 1)
	h.Lookup(addr(1)) // 1 is now the most recent; 2 the least
	h.Record(addr(4), PatternSteady, 2)
	if _, _, ok := h.Lookup(addr(2)); ok {
		t.Error("the least recently used source survived an eviction")
	}
	for _, a := range []int{1, 3, 4} {
		if _, _, ok := h.Lookup(addr(a)); !ok {
			t.Errorf("source %d evicted", a)
		}
	}
	if p, w, _ := h.Lookup(addr(1)); p != PatternBursty || w != 20 {
		t.Errorf("source 1: %v/%d, want bursty/20", p, w)
	}
	st := h.Stats()
	if st.Len != 3 || st.Evictions != 1 || st.Misses != 2 || st.Hits != 5 {
		t.Errorf("stats %+v, want len 3, 1 eviction, 2 misses, 5 hits", st)
	}
}

func TestHistoryUpdateAndUnknown(t *testing.T) {
	h := NewHistory(2)
	h.Record(addr(1), PatternBursty, 20)
	h.Record(addr(1), PatternUnknown, 1) // said too little: kept
	h.Record(addr(1), PatternSteady, 3)
	if p, w, _ := h.Lookup(addr(1)); p != PatternSteady || w != 3 {
		t.Errorf("after update %v/%d, want steady/3", p, w)
	}
	if h.Stats().Len != 1 {
		t.Errorf("len %d after updates of one source", h.Stats().Len)
	}
}

func TestHistorySizes(t *testing.T) {
	if NewHistory(-1) != nil {
		t.Error("negative size gave a table")
	}
	var none *History
	none.Record(addr(1), PatternBursty, 9)
	if _, w, ok := none.Lookup(addr(1)); ok || w != 1 {
		t.Error("nil table remembers")
	}
	if c := NewHistory(0).size; c != DefaultHistory {
		t.Errorf("default size %d", c)
	}
	if c := NewHistory(MaxHistory + 1).size; c != MaxHistory {
		t.Errorf("size not capped: %d", c)
	}
}

// An empty table holds next to nothing: it grows as sources come, up to
// its size, and keeps recycling its entries there. Every entropy pool has
// one from the start; made at its full size, the default table allocated
// about 490 KB (its map's control words written at once) before any
// device connected.
func TestHistoryGrowsAsSourcesCome(t *testing.T) {
	const size = DefaultHistory
	// TotalAlloc is the process's: the runtime and the testing package may
	// allocate between the two readings (3,944 bytes once, under qemu-arm,
	// with no other goroutine of this package alive). The least of a few
	// tries is the table's own; a table made at full size would allocate
	// hundreds of KB in every one.
	var h *History
	made := ^uint64(0)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		h = NewHistory(size)
		runtime.ReadMemStats(&after)
		made = min(made, after.TotalAlloc-before.TotalAlloc)
	}
	if made > 1<<10 {
		t.Errorf("an empty table of %d allocated %d bytes, want at most 1 KiB", size, made)
	}
	for i := range size + 10 {
		h.Record(addr(i), PatternSteady, 2)
	}
	if len(h.entries) != size || cap(h.entries) > 2*size || h.Stats().Evictions != 10 {
		t.Errorf("%d sources into a table of %d: %d entries (capacity %d), %d evicted; want %d, at most %d, 10",
			size+10, size, len(h.entries), cap(h.entries), h.Stats().Evictions, size, 2*size)
	}
	if _, _, ok := h.Lookup(addr(size + 9)); !ok {
		t.Error("the newest source is not remembered")
	}
	if _, _, ok := h.Lookup(addr(0)); ok {
		t.Error("the oldest source was not evicted")
	}
}

// The LRU list stays consistent under churn well past its size.
func TestHistoryChurn(t *testing.T) {
	const size = 64
	h := NewHistory(size)
	for i := range 10 * size {
		h.Record(addr(i), PatternSteady, uint32(i))
		h.Lookup(addr(i / 2))
	}
	if st := h.Stats(); st.Len != size || st.Evictions == 0 {
		t.Fatalf("stats %+v", st)
	}
	n := 0
	for i := h.head; i >= 0; i = h.entries[i].next {
		n++
		if n > size {
			t.Fatal("list longer than the table: a cycle")
		}
	}
	if n != size {
		t.Fatalf("list holds %d, map %d", n, size)
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		h.Record(addr(7), PatternBursty, 3)
		h.Lookup(addr(7))
	}); allocs != 0 {
		t.Errorf("Record/Lookup of a known source allocate %v", allocs)
	}
}
