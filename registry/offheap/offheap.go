// Package offheap gives edgemux's large, pointer-free, long-lived tables
// (the registry's slots, the rings, the workers' read buffers, the loops'
// peek buffers, the stage timestamps) memory mapped outside the Go heap.
//
// Why: the collector paces itself on the live heap. With Go's GOGC of 100
// the heap may grow to twice what survived the last cycle before the next
// one starts (1.5 times at edgemux's default of 50), so every byte of a
// table that lives as long as the gateway also lets garbage pile up
// beside it. At start these tables are most of edgemux's live heap (about
// 1.8 MB of 3 MB with 4,096 registry slots), and so they doubled
// themselves in the peak RSS of a fan-out.
// Mapped here they cost only the pages that are touched, and the heap's
// goal follows what the handlers really keep.
//
// Only memory that holds no Go pointers may live here: the collector does
// not scan it. Each block is unmapped by a cleanup when its owner, the Go
// object that holds it, becomes unreachable; so a pointer into a block must
// not outlive its owner (the registry's slots are reached through the
// registry, a ring's buffer through the ring). When the kernel refuses a
// mapping the block comes from the Go heap instead, as before.
//
// Under the race detector every block comes from the Go heap: the detector
// watches only memory the runtime knows, and the rings' buffers are exactly
// where it should look for a broken producer/consumer handshake.
package offheap

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Bytes returns n zeroed bytes (n > 0) for owner's use. They are mapped
// outside the Go heap and unmapped once owner is unreachable; owner must
// be a pointer to the start of a heap object that does not reach the block
// through anything but its own fields.
func Bytes[T any](owner *T, n int) []byte {
	if raceEnabled {
		return make([]byte, n)
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, n)
	}
	runtime.AddCleanup(owner, unmap, b)
	return b
}

// Slice returns n zeroed elements (n > 0) of E for owner's use, as Bytes
// does. E must hold no pointers, and need no alignment beyond 8 bytes
// (no Go type does): a mapping starts on a page, and the heap's fallback
// aligns a block of 8 bytes or more to 8.
func Slice[E, T any](owner *T, n int) []E {
	var e E
	b := Bytes(owner, n*int(unsafe.Sizeof(e)))
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// unmap returns a block to the kernel. It runs on the runtime's cleanup
// goroutine; an error here can only mean the block was never a mapping.
func unmap(b []byte) {
	if watch := unmapWatch.Load(); watch != nil {
		(*watch)(b)
		return
	}
	_ = unix.Munmap(b)
}

// unmapWatch, when set (by a test), unmaps instead of unmap. Atomic: the
// cleanups of blocks that were dropped before may be running meanwhile.
var unmapWatch atomic.Pointer[func([]byte)]
