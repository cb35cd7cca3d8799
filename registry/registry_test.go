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
	if s.State() != Sniffing || s.Loop() != 3 || s.Peer() != peer || s.OpenedAt.Load() != 100 {
		t.Fatalf("slot = state %v loop %d peer %v opened %d", s.State(), s.Loop(), s.Peer(), s.OpenedAt.Load())
	}
	s.Assign(4, 300)
	if s.Proto() != 4 || s.Worker() != 300 || s.Loop() != 3 || s.Peer() != peer {
		t.Fatalf("after Assign: proto %d worker %d loop %d peer %v", s.Proto(), s.Worker(), s.Loop(), s.Peer())
	}
	if _, err := r.Open(5, peer, 0, 0); err != ErrBusy {
		t.Fatalf("second Open = %v, want ErrBusy", err)
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d", r.Len())
	}
	if st, ok := r.BeginClose(5, gen); !ok || st != Sniffing {
		t.Fatalf("BeginClose = %v, %v; want sniffing, true", st, ok)
	}
	if _, ok := r.BeginClose(5, gen); ok {
		t.Fatal("BeginClose must succeed exactly once")
	}
	r.Retire(5)
	if r.Lookup(5, gen) != nil {
		t.Fatal("a retired generation must be stale")
	}
	r.Release(5)
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
		r.Retire(fd)
		r.Release(fd)
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
