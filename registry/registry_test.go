package registry

import (
	"encoding/json"
	"net/netip"
	"sync"
	"testing"
	"unsafe"
)

func TestSlotIsOneAlignedCacheLine(t *testing.T) {
	if got := unsafe.Sizeof(Slot{}); got != SlotSize {
		t.Fatalf("sizeof(Slot) = %d, want %d", got, SlotSize)
	}
	for _, size := range []int{1, 7, 1000, 20000} {
		r := New(size)
		if r.Size() != size {
			t.Fatalf("Size() = %d, want %d", r.Size(), size)
		}
		for _, fd := range []int{0, size / 2, size - 1} {
			if p := uintptr(unsafe.Pointer(r.Slot(fd))); p%SlotSize != 0 {
				t.Fatalf("size %d: slot %d at %#x is not 64-byte aligned", size, fd, p)
			}
		}
	}
}

func TestOpenLookupClose(t *testing.T) {
	r := New(16)
	peer := netip.MustParseAddrPort("127.0.0.9:4242")
	gen, err := r.Open(5, peer, 3, 100)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Lookup(5, gen)
	if s == nil {
		t.Fatal("Lookup of a fresh slot failed")
	}
	if s.State() != Sniffing || s.Loop() != 3 || s.Peer() != peer || s.OpenedAt() != 100 {
		t.Fatalf("slot = state %v loop %d peer %v opened %d", s.State(), s.Loop(), s.Peer(), s.OpenedAt())
	}
	if err := r.Classify(5, gen, 4, 300, Active); err != nil {
		t.Fatal(err)
	}
	if s.Proto() != 4 || s.Worker() != 300 || s.Loop() != 3 || s.Peer() != peer || s.State() != Active {
		t.Fatalf("after Classify: proto %d worker %d loop %d peer %v state %v", s.Proto(), s.Worker(), s.Loop(), s.Peer(), s.State())
	}
	if _, err := r.Open(5, peer, 0, 0); err != ErrBusy {
		t.Fatalf("second Open = %v, want ErrBusy", err)
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d", r.Len())
	}
	if r.EndClose(5, gen) {
		t.Fatal("EndClose before BeginClose must refuse")
	}
	if st, ok := r.BeginClose(5, gen); !ok || st != Active {
		t.Fatalf("BeginClose = %v, %v; want active, true", st, ok)
	}
	if _, ok := r.BeginClose(5, gen); ok {
		t.Fatal("BeginClose must succeed exactly once")
	}
	if r.EndClose(5, gen+2) {
		t.Fatal("EndClose with another generation must refuse")
	}
	if !r.EndClose(5, gen) {
		t.Fatal("EndClose after BeginClose failed")
	}
	if r.Lookup(5, gen) != nil {
		t.Fatal("a closed generation must be stale")
	}
	if r.EndClose(5, gen) || r.EndClose(5, gen+1) {
		t.Fatal("EndClose must succeed exactly once")
	}
	gen2, err := r.Open(5, netip.MustParseAddrPort("[::1]:80"), 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	if gen%2 != 1 || gen2%2 != 1 {
		t.Fatalf("generations at open must be odd: %d, %d", gen, gen2)
	}
	if gen2 == gen || r.Lookup(5, gen) != nil || r.Lookup(5, gen2) == nil {
		t.Fatalf("reused fd: old gen %d new gen %d", gen, gen2)
	}
	if got := r.Slot(5).Peer().String(); got != "[::1]:80" {
		t.Fatalf("IPv6 peer = %s", got)
	}
	if r.Stale() != 2 {
		t.Fatalf("Stale = %d, want 2", r.Stale())
	}
	if _, err := r.Open(16, peer, 0, 0); err != ErrRange {
		t.Fatalf("Open out of range = %v", err)
	}
	if r.Slot(-1) != nil || r.Lookup(99, 1) != nil {
		t.Fatal("out-of-range lookups must fail")
	}
}

// TestStaleEventsNeverReachReusedFD reuses a handful of fds many times
// while readers look events up with the generation they were issued for:
// a reader may see its connection or nothing, never the successor.
func TestStaleEventsNeverReachReusedFD(t *testing.T) {
	const fds, rounds = 8, 20000
	r := New(fds)
	type ev struct {
		fd   int
		gen  uint32
		port uint16
	}
	events := make(chan ev, 1024)
	var wg sync.WaitGroup
	var misrouted int
	var mu sync.Mutex
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range events {
				if s := r.Lookup(e.fd, e.gen); s != nil && s.Peer().Port() != e.port {
					// The slot is live with our gen but shows another
					// connection's peer: that would be a misroute.
					if s.Gen() == e.gen {
						mu.Lock()
						misrouted++
						mu.Unlock()
					}
				}
			}
		}()
	}
	for i := range rounds {
		fd := i % fds
		port := uint16(i%60000 + 1)
		gen, err := r.Open(fd, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), 0, uint32(i))
		if err != nil {
			t.Fatal(err)
		}
		events <- ev{fd, gen, port}
		if _, ok := r.BeginClose(fd, gen); !ok {
			t.Fatal("BeginClose failed")
		}
		if !r.EndClose(fd, gen) {
			t.Fatal("EndClose failed")
		}
	}
	close(events)
	wg.Wait()
	if misrouted != 0 {
		t.Fatalf("%d events reached a reused fd", misrouted)
	}
	if r.Len() != 0 {
		t.Fatalf("Len = %d after all closed", r.Len())
	}
}

// TestClassifyOnlyFromSniffing: a connection is classified once, by the
// loop that sniffs it, and only into a worker-owned state.
func TestClassifyOnlyFromSniffing(t *testing.T) {
	r := New(8)
	peer := netip.MustParseAddrPort("127.0.0.1:1")
	gen, _ := r.Open(2, peer, 0, 0)
	for _, st := range []State{Free, Sniffing, Forwarded, Closing} {
		if err := r.Classify(2, gen, 1, 1, st); err != ErrState {
			t.Errorf("Classify to %v = %v, want ErrState", st, err)
		}
	}
	if err := r.Classify(2, gen+2, 1, 1, Active); err != ErrStale {
		t.Errorf("Classify of another generation = %v, want ErrStale", err)
	}
	if err := r.Classify(2, gen, 1, 1, Quarantined); err != nil {
		t.Fatal(err)
	}
	if err := r.Classify(2, gen, 1, 1, Active); err != ErrState {
		t.Errorf("second Classify = %v, want ErrState", err)
	}
	if err := r.Classify(99, 1, 1, 1, Active); err != ErrStale {
		t.Errorf("Classify out of range = %v, want ErrStale", err)
	}
}

// TestPostTakeCoalesce: posts for a queued connection add bits without
// asking for another ring entry; Take clears the mark before it takes the
// bits, so a post after it asks again; posts for another generation never
// hold back the live one.
func TestPostTakeCoalesce(t *testing.T) {
	r := New(8)
	gen, _ := r.Open(3, netip.MustParseAddrPort("127.0.0.1:1"), 0, 0)
	if !r.Post(3, gen, EvRead) {
		t.Fatal("first Post must ask to queue")
	}
	if r.Post(3, gen, EvWrite) {
		t.Fatal("a Post while queued must coalesce")
	}
	bits, s := r.Take(3, gen, 42)
	if s == nil || bits != EvRead|EvWrite || s.LastActive() != 42 || s.Events() != 1 {
		t.Fatalf("Take = %#x, %v (last active %d, events %d)", bits, s, s.LastActive(), s.Events())
	}
	if !r.Post(3, gen, EvHup) {
		t.Fatal("a Post after Take must ask to queue again")
	}
	// A stale post (an old generation) marks queued with its own
	// generation; the live connection's next post still queues.
	r.Take(3, gen, 43)
	r.Post(3, gen-2, EvRead)
	if !r.Post(3, gen, EvRead) {
		t.Fatal("a stale mark must not hold back the live connection")
	}
	if _, s := r.Take(3, gen+2, 0); s != nil {
		t.Fatal("Take of another generation must miss")
	}
	if r.Post(99, 1, EvRead) {
		t.Fatal("Post out of range must not ask to queue")
	}
}

// TestCountersKeepToTheirGeneration: the owner's counters and its write
// wish change only for the live connection, never for a successor.
func TestCountersKeepToTheirGeneration(t *testing.T) {
	r := New(8)
	gen, _ := r.Open(4, netip.MustParseAddrPort("127.0.0.1:1"), 0, 0)
	r.CountIn(4, gen, 100)
	r.CountDropped(4, gen, 3)
	r.SetWantsWrite(4, gen, true)
	s := r.Slot(4)
	if s.BytesIn() != 100 || s.Dropped() != 3 || !s.WantsWrite() {
		t.Fatalf("bytes %d dropped %d wants %v", s.BytesIn(), s.Dropped(), s.WantsWrite())
	}
	r.BeginClose(4, gen)
	r.EndClose(4, gen)
	gen2, _ := r.Open(4, netip.MustParseAddrPort("127.0.0.1:2"), 0, 0)
	r.CountIn(4, gen, 5)
	r.CountDropped(4, gen, 5)
	r.SetWantsWrite(4, gen, true)
	if s.BytesIn() != 0 || s.Dropped() != 0 || s.WantsWrite() {
		t.Fatalf("the successor (gen %d) got its predecessor's counts: bytes %d dropped %d wants %v",
			gen2, s.BytesIn(), s.Dropped(), s.WantsWrite())
	}
}

func TestSnapshotJSON(t *testing.T) {
	r := New(8)
	if _, err := r.Open(3, netip.MustParseAddrPort("127.0.0.2:9"), 1, 7); err != nil {
		t.Fatal(err)
	}
	views := r.Snapshot(nil, 10)
	if len(views) != 1 || views[0].FD != 3 || views[0].State != "sniffing" || views[0].Peer != "127.0.0.2:9" {
		t.Fatalf("Snapshot = %+v", views)
	}
	if _, err := json.Marshal(views); err != nil {
		t.Fatal(err)
	}
	if got := r.Snapshot(nil, 0); len(got) != 0 {
		t.Fatalf("Snapshot with max 0 = %d views", len(got))
	}
}

func BenchmarkLookup(b *testing.B) {
	r := New(20000)
	gen, _ := r.Open(1234, netip.MustParseAddrPort("127.0.0.1:1"), 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		if r.Lookup(1234, gen) == nil {
			b.Fatal("lookup failed")
		}
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	r := New(64)
	gen, _ := r.Open(10, netip.MustParseAddrPort("127.0.0.1:1"), 0, 0)
	if n := testing.AllocsPerRun(1000, func() { r.Lookup(10, gen) }); n != 0 {
		t.Fatalf("Lookup allocates %v times", n)
	}
}

// Used is one past the highest fd ever opened, whatever closed since, and
// a Snapshot (which scans to it) still sees every open slot.
func TestUsedIsTheHighWater(t *testing.T) {
	r := New(1000)
	if r.Used() != 0 {
		t.Fatalf("empty registry used %d", r.Used())
	}
	peer := netip.MustParseAddrPort("127.0.0.1:1")
	gens := map[int]uint32{}
	for _, fd := range []int{5, 2, 700} {
		gen, err := r.Open(fd, peer, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		gens[fd] = gen
	}
	if r.Used() != 701 {
		t.Fatalf("used %d after fds 5, 2, 700; want 701", r.Used())
	}
	if _, ok := r.BeginClose(700, gens[700]); !ok || !r.EndClose(700, gens[700]) {
		t.Fatal("close of fd 700")
	}
	if r.Used() != 701 {
		t.Fatalf("used %d after closing fd 700; want 701 (it never goes down)", r.Used())
	}
	if _, err := r.Open(999, peer, 0, 1); err != nil {
		t.Fatal(err)
	}
	var fds []int
	for _, v := range r.Snapshot(nil, 10) {
		fds = append(fds, v.FD)
	}
	if len(fds) != 3 || fds[0] != 2 || fds[1] != 5 || fds[2] != 999 {
		t.Fatalf("snapshot saw fds %v, want [2 5 999]", fds)
	}
}
