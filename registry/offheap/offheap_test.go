package offheap

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type owner struct {
	b []byte
	_ [64]byte // big enough to be a heap object of its own, never a tiny one
}

func TestBytesAreZeroedAndWritable(t *testing.T) {
	o := &owner{}
	n := 3*os.Getpagesize() + 5
	o.b = Bytes(o, n)
	if len(o.b) != n {
		t.Fatalf("len %d, want %d", len(o.b), n)
	}
	for i, v := range o.b {
		if v != 0 {
			t.Fatalf("byte %d is %d, want 0", i, v)
		}
	}
	for i := range o.b {
		o.b[i] = byte(i)
	}
	if o.b[n-1] != byte(n-1) {
		t.Fatal("last byte did not keep what was written")
	}
	runtime.KeepAlive(o)
}

// TestSliceIsTypedZeroedAndWritable: Slice's elements span the whole
// block, start 8-aligned, read zero and keep what is written.
func TestSliceIsTypedZeroedAndWritable(t *testing.T) {
	type words struct {
		w []uint64
		_ [64]byte
	}
	o := &words{}
	n := os.Getpagesize() + 3 // spills onto a second page
	o.w = Slice[uint64](o, n)
	if len(o.w) != n || uintptr(unsafe.Pointer(&o.w[0]))%8 != 0 {
		t.Fatalf("len %d at %p, want %d 8-aligned words", len(o.w), &o.w[0], n)
	}
	for i, v := range o.w {
		if v != 0 {
			t.Fatalf("word %d is %d, want 0", i, v)
		}
		o.w[i] = uint64(i) << 32
	}
	if o.w[n-1] != uint64(n-1)<<32 {
		t.Fatal("last word did not keep what was written")
	}
	runtime.KeepAlive(o)
}

// TestBlockIsUnmappedWithItsOwner: once nothing reaches the owner, the
// collector's cleanup gives the block back to the kernel, and munmap takes
// it (it refuses an address that is not a mapping's).
func TestBlockIsUnmappedWithItsOwner(t *testing.T) {
	skipUnderRace(t)
	type unmapped struct {
		start uintptr
		n     int
		err   error
	}
	done := make(chan unmapped, 4096) // room for every block earlier tests dropped
	watch := func(b []byte) {
		err := unix.Munmap(b)
		select {
		case done <- unmapped{uintptr(unsafe.Pointer(unsafe.SliceData(b))), len(b), err}:
		default: // the test has gone; the block is unmapped all the same
		}
	}
	unmapWatch.Store(&watch)
	defer unmapWatch.Store(nil)

	start := func() uintptr {
		o := &owner{}
		o.b = Bytes(o, 1<<20)
		if !mappedAt(uintptr(unsafe.Pointer(unsafe.SliceData(o.b)))) {
			t.Fatal("the block is in no mapping")
		}
		return uintptr(unsafe.Pointer(unsafe.SliceData(o.b)))
	}()
	for range 500 {
		runtime.GC()
		select {
		case u := <-done: // other tests' blocks go the same way
			if u.err != nil {
				t.Fatalf("munmap of %#x (%d bytes): %v", u.start, u.n, u.err)
			}
			if u.start == start {
				if u.n != 1<<20 {
					t.Fatalf("unmapped %d bytes at %#x, want 1 MiB", u.n, start)
				}
				return
			}
		case <-time.After(10 * time.Millisecond): // the cleanup runs on a goroutine of its own
		}
	}
	t.Fatalf("the block at %#x was not unmapped after its owner became unreachable", start)
}

// TestBlockIsOutsideTheHeapGoal: a block does not count as live heap, so
// the collector does not let garbage grow beside it; the same bytes from
// make do.
func TestBlockIsOutsideTheHeapGoal(t *testing.T) {
	skipUnderRace(t)
	const size = 16 << 20
	before := liveHeap()
	o := &owner{}
	o.b = Bytes(o, size)
	o.b[size-1] = 1
	withBlock := liveHeap()
	h := make([]byte, size)
	withMake := liveHeap()
	runtime.KeepAlive(o)
	runtime.KeepAlive(h)
	if grew := withBlock - before; grew > 1<<20 {
		t.Errorf("a %d-byte block grew the live heap by %d bytes", size, grew)
	}
	if grew := withMake - withBlock; grew < size*9/10 {
		t.Errorf("control: make of %d bytes grew the live heap by only %d; the measure is broken", size, grew)
	}
}

func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector blocks come from the Go heap; make norace runs this")
	}
}

// liveHeap collects and returns the bytes the collector marked live.
func liveHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// mappedAt reports whether addr lies in a mapping of /proc/self/maps. The
// kernel may merge a block with a neighbouring mapping, so a block is found
// by containment, not by its start.
func mappedAt(addr uintptr) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		panic(err)
	}
	for line := range strings.Lines(string(maps)) {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			return true
		}
	}
	return false
}
