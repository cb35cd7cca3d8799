package route

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

func TestNewRingCapacity(t *testing.T) {
	tests := []struct {
		capacity int
		ok       bool
	}{
		{-4, false}, {0, false}, {1, false}, {2, true}, {3, false}, {4, true},
		{6, false}, {1024, true}, {1000, false}, {1 << 20, true}, {1 << 21, false},
		{1<<20 + 1, false},
	}
	for _, tt := range tests {
		r, err := NewRing(tt.capacity)
		if tt.ok {
			if err != nil || r.Cap() != tt.capacity || r.Len() != 0 {
				t.Errorf("NewRing(%d) = cap %v, err %v", tt.capacity, r, err)
			}
			continue
		}
		if !errors.Is(err, ErrRingCapacity) || r != nil {
			t.Errorf("NewRing(%d) err = %v, want ErrRingCapacity", tt.capacity, err)
		}
	}
}

// The read-only, consumer and producer fields never share a cache line,
// wherever the ring starts: every 8-byte offset from a line boundary is
// checked (32-bit targets place it at any of them), then real allocations.
func TestRingLayout(t *testing.T) {
	var r Ring
	for base := uintptr(0); base < cacheLine; base += 8 {
		checkRingLines(t, base, base+unsafe.Offsetof(r.buf), base+unsafe.Offsetof(r.head), base+unsafe.Offsetof(r.tail))
	}
	for range 16 {
		r, err := NewRing(8)
		if err != nil {
			t.Fatal(err)
		}
		checkRingLines(t, uintptr(unsafe.Pointer(r)), uintptr(unsafe.Pointer(&r.buf)),
			uintptr(unsafe.Pointer(&r.head)), uintptr(unsafe.Pointer(&r.tail)))
	}
}

// checkRingLines checks a ring whose groups start at the given addresses:
// the last byte of one group and the first of the next are on different
// lines, and nothing after the producer's group shares its line.
func checkRingLines(t *testing.T, base, readOnly, consumer, producer uintptr) {
	t.Helper()
	var r Ring
	line := func(addr uintptr) uintptr { return addr / cacheLine }
	groupEnd := [...]uintptr{
		readOnly + unsafe.Offsetof(r.mask) - unsafe.Offsetof(r.buf) + 8,
		consumer + unsafe.Offsetof(r.cachedTail) - unsafe.Offsetof(r.head) + 8,
		producer + unsafe.Offsetof(r.cachedHead) - unsafe.Offsetof(r.tail) + 8,
	}
	next := [...]uintptr{consumer, producer, base + unsafe.Sizeof(r)}
	for i := range groupEnd {
		if line(groupEnd[i]-1) == line(next[i]) {
			t.Errorf("ring at %#x: group %d ends on the line where the next starts (%#x, %#x)", base, i, groupEnd[i]-1, next[i])
		}
	}
}

func TestRingFullEmpty(t *testing.T) {
	for _, capacity := range []int{2, 4, 64} {
		r, err := NewRing(capacity)
		if err != nil {
			t.Fatal(err)
		}
		next := uint64(0)
		for round := range 5 { // several rounds to cross the index wrap
			if _, ok := r.Pop(); ok {
				t.Fatalf("cap %d round %d: Pop on empty ring succeeded", capacity, round)
			}
			for i := range capacity {
				if !r.Push(next + uint64(i)) {
					t.Fatalf("cap %d: Push %d of %d failed", capacity, i, capacity)
				}
			}
			if r.Push(999) {
				t.Fatalf("cap %d: Push on full ring succeeded", capacity)
			}
			if r.Len() != capacity {
				t.Fatalf("cap %d: Len = %d when full", capacity, r.Len())
			}
			for i := range capacity {
				v, ok := r.Pop()
				if !ok || v != next+uint64(i) {
					t.Fatalf("cap %d: Pop = %d,%v want %d", capacity, v, ok, next+uint64(i))
				}
			}
			if r.Len() != 0 {
				t.Fatalf("cap %d: Len = %d when empty", capacity, r.Len())
			}
			next += uint64(capacity)
		}
	}
}

// One producer and one consumer goroutine move millions of values; order
// and checksum must survive, and -race must see the handoff as ordered.
func TestRingSPSC(t *testing.T) {
	n := uint64(3_000_000)
	if testing.Short() || raceEnabled {
		n = 1_000_000
	}
	r, err := NewRing(256)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var sum uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := uint64(1); v <= n; v++ {
			for !r.Push(v) {
				runtime.Gosched()
			}
		}
	}()
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // a metrics reader calling Len concurrently
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if l := r.Len(); l < 0 || l > r.Cap() {
				t.Errorf("Len = %d out of 0..%d", l, r.Cap())
				return
			}
			runtime.Gosched()
		}
	}()
	for want := uint64(1); want <= n; {
		v, ok := r.Pop()
		if !ok {
			runtime.Gosched()
			continue
		}
		if v != want {
			t.Fatalf("popped %d, want %d", v, want)
		}
		sum += v
		want++
	}
	close(stop)
	wg.Wait()
	if want := n * (n + 1) / 2; sum != want {
		t.Fatalf("checksum %d, want %d", sum, want)
	}
}

func TestRingAllocs(t *testing.T) {
	r, _ := NewRing(16)
	allocs := testing.AllocsPerRun(1000, func() {
		r.Push(1)
		r.Pop()
		_ = r.Len()
	})
	if allocs != 0 {
		t.Fatalf("Push/Pop/Len allocate %v per run, want 0", allocs)
	}
}

// FuzzRing checks the ring against a slice model for any op sequence:
// even bytes push, odd bytes pop.
func FuzzRing(f *testing.F) {
	for _, seed := range [][]byte{{}, {0, 1}, {0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, {1, 1, 0, 2, 4, 3, 5, 7}} {
		f.Add(uint8(1), seed)
	}
	f.Fuzz(func(t *testing.T, capLog uint8, ops []byte) {
		capacity := 1 << (1 + capLog%6)
		r, err := NewRing(capacity)
		if err != nil {
			t.Fatal(err)
		}
		var model []uint64
		for i, op := range ops {
			if op%2 == 0 {
				ok := r.Push(uint64(i))
				if ok != (len(model) < capacity) {
					t.Fatalf("op %d: Push = %v with %d of %d queued", i, ok, len(model), capacity)
				}
				if ok {
					model = append(model, uint64(i))
				}
			} else {
				v, ok := r.Pop()
				if ok != (len(model) > 0) || (ok && v != model[0]) {
					t.Fatalf("op %d: Pop = %d,%v, model %v", i, v, ok, model)
				}
				if ok {
					model = model[1:]
				}
			}
			if r.Len() != len(model) {
				t.Fatalf("op %d: Len = %d, want %d", i, r.Len(), len(model))
			}
		}
	})
}

func BenchmarkRingPushPop(b *testing.B) {
	r, _ := NewRing(1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Push(uint64(i))
		r.Pop()
	}
}

// BenchmarkRingSPSC moves b.N values from this goroutine to another.
func BenchmarkRingSPSC(b *testing.B) {
	r, _ := NewRing(1024)
	n := uint64(b.N)
	done := make(chan uint64)
	go func() {
		var sum uint64
		for got := uint64(0); got < n; {
			v, ok := r.Pop()
			if !ok {
				runtime.Gosched()
				continue
			}
			sum += v
			got++
		}
		done <- sum
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for v := uint64(0); v < n; v++ {
		for !r.Push(v) {
			runtime.Gosched()
		}
	}
	<-done
}
