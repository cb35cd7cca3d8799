// Package registry is edgemux's fd-indexed connection registry: one
// 64-byte, 64-byte-aligned slot per possible file descriptor, so the epoll
// loops and workers find a connection's metadata by indexing, with no
// getpeername and no map on the hot path.
//
// Every event in edgemux carries (fd, gen). The generation is bumped when a
// slot opens and again when it closes, so an event that was in flight while
// its fd was closed and reused by a new connection never reaches the new
// one: consumers compare generations and drop stale events (seed 002, bug 1).
//
// Close order is fixed: state=Closing, EPOLL_CTL_DEL, gen++, state=Free,
// close(fd). The registry provides the state steps; the gateway does the
// syscalls in between. The slot is freed before close(fd), not after as the
// design brief first had it: the kernel cannot hand the fd number out again
// until close returns, so nobody can claim the slot early, and a loop that
// accepts the reused number a moment later never finds it still Closing.
package registry

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync/atomic"
	"unsafe"
)

// SlotSize is the size and alignment of a slot: one cache line.
const SlotSize = 64

// State is a slot's lifecycle state.
type State uint32

// Slot states.
const (
	Free        State = iota // no connection
	Sniffing                 // accepted, not yet classified
	Active                   // owned by a worker
	Quarantined              // owned by the quarantine pool
	Forwarded                // handed to a forwarder or the admin server
	Closing                  // being torn down
)

var stateNames = [...]string{"free", "sniffing", "active", "quarantined", "forwarded", "closing"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "invalid"
}

// Event bits a loop leaves for a connection's owner in Slot.Pending.
const (
	EvRead  uint32 = 1 << iota // EPOLLIN
	EvWrite                    // EPOLLOUT
	EvHup                      // EPOLLRDHUP, EPOLLHUP or EPOLLERR
	EvOpen                     // the connection was just handed to the owner
	EvProbe                    // ... as a silent peer to probe
)

// Errors.
var (
	ErrRange = errors.New("registry: fd out of range")
	ErrBusy  = errors.New("registry: slot in use")
)

// Slot is one connection's metadata. Its layout is fixed at 64 bytes so
// that neighbouring slots never share a cache line (a test asserts it).
// Every field is an atomic: the loop writes a slot while workers, other
// loops and the admin view read it, and the race detector must stay quiet.
type Slot struct {
	gen        atomic.Uint32 // bumped at open and at close
	state      atomic.Uint32 // State
	Pending    atomic.Uint32 // Ev* bits not yet taken by the owner
	Queued     atomic.Uint32 // generation whose event sits in a ring; 0 = none
	LastActive atomic.Uint32 // coarse clock (seconds) of the last event
	Events     atomic.Uint32 // events seen, for traffic-pattern learning
	meta       atomic.Uint64 // proto | loop<<8 | worker<<16 | port<<32 | flags<<48
	addrHi     atomic.Uint64 // peer address, IPv4 mapped into IPv6
	addrLo     atomic.Uint64
	OpenedAt   atomic.Uint32 // coarse clock at accept
	BytesIn    atomic.Uint32 // bytes read, wrapping
	Dropped    atomic.Uint32 // messages its subscriber lost (drop policy), wrapping
	WantWrite  atomic.Uint32 // 1 while the owner has output waiting for EPOLLOUT
}

// slot flags.
const flagIPv4 = 1

func packMeta(proto uint8, loop uint8, worker uint16, port uint16, flags uint8) uint64 {
	return uint64(proto) | uint64(loop)<<8 | uint64(worker)<<16 | uint64(port)<<32 | uint64(flags)<<48
}

// Gen is the slot's current generation.
func (s *Slot) Gen() uint32 { return s.gen.Load() }

// State is the slot's current state.
func (s *Slot) State() State { return State(s.state.Load()) }

// SetState moves the slot to st.
func (s *Slot) SetState(st State) { s.state.Store(uint32(st)) }

// Proto is the protocol number the sniffer found (sniff.Proto).
func (s *Slot) Proto() uint8 { return uint8(s.meta.Load()) }

// Loop is the index of the epoll loop that accepted the connection.
func (s *Slot) Loop() int { return int(uint8(s.meta.Load() >> 8)) }

// Worker is the index of the owning worker.
func (s *Slot) Worker() int { return int(uint16(s.meta.Load() >> 16)) }

// Assign records the classification: protocol and owning worker. Only the
// loop that owns the slot calls it, before the first event for the slot is
// published to the worker.
func (s *Slot) Assign(proto uint8, worker int) {
	m := s.meta.Load()
	m = m&^0xffff_ffff | uint64(proto) | m&0xff00 | uint64(uint16(worker))<<16
	s.meta.Store(m)
}

// Peer is the remote address recorded at accept.
func (s *Slot) Peer() netip.AddrPort {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], s.addrHi.Load())
	binary.BigEndian.PutUint64(b[8:], s.addrLo.Load())
	m := s.meta.Load()
	a := netip.AddrFrom16(b)
	if uint8(m>>48)&flagIPv4 != 0 {
		a = a.Unmap()
	}
	return netip.AddrPortFrom(a, uint16(m>>32))
}

// Registry is the slot table. All methods are safe for concurrent use as
// long as each fd is opened and closed by one goroutine at a time, which
// the kernel guarantees: an fd number is not handed out twice while open.
type Registry struct {
	slots []Slot
	open  atomic.Int64
	stale atomic.Uint64
}

// New makes a registry for fds 0..size-1.
func New(size int) *Registry {
	if size < 1 {
		size = 1
	}
	// Over-allocate raw bytes and start at the first 64-byte boundary; a
	// Slot holds no pointers, so the GC is happy with this view of them.
	buf := make([]byte, size*SlotSize+SlotSize)
	off := int(SlotSize-uintptr(unsafe.Pointer(&buf[0]))%SlotSize) % SlotSize
	slots := unsafe.Slice((*Slot)(unsafe.Pointer(&buf[off])), size)
	return &Registry{slots: slots}
}

// Size is the number of slots.
func (r *Registry) Size() int { return len(r.slots) }

// Slot returns the slot of fd, or nil when fd is out of range.
func (r *Registry) Slot(fd int) *Slot {
	if uint(fd) >= uint(len(r.slots)) {
		return nil
	}
	return &r.slots[fd]
}

// Open claims fd's slot for a newly accepted connection and returns the
// new generation. The slot must be Free. Generations of open connections
// are always odd (Open and Retire each add one), so 0 can mean "none".
func (r *Registry) Open(fd int, peer netip.AddrPort, loop int, now uint32) (uint32, error) {
	s := r.Slot(fd)
	if s == nil {
		return 0, ErrRange
	}
	if !s.state.CompareAndSwap(uint32(Free), uint32(Sniffing)) {
		return 0, ErrBusy
	}
	s.Pending.Store(0)
	s.Queued.Store(0)
	s.WantWrite.Store(0)
	s.LastActive.Store(now)
	s.Events.Store(0)
	s.BytesIn.Store(0)
	s.OpenedAt.Store(now)
	s.Dropped.Store(0)
	a := peer.Addr()
	var flags uint8
	if a.Is4() {
		flags = flagIPv4
	}
	b := a.As16()
	s.addrHi.Store(binary.BigEndian.Uint64(b[:8]))
	s.addrLo.Store(binary.BigEndian.Uint64(b[8:]))
	s.meta.Store(packMeta(0, uint8(loop), 0, peer.Port(), flags))
	r.open.Add(1)
	return s.gen.Add(1), nil
}

// Lookup returns fd's slot if it is open with generation gen; otherwise it
// counts a stale event and returns nil.
func (r *Registry) Lookup(fd int, gen uint32) *Slot {
	s := r.Slot(fd)
	if s == nil || s.gen.Load() != gen || s.State() == Free {
		r.stale.Add(1)
		return nil
	}
	return s
}

// Live is Lookup without counting a miss: for timers, which routinely
// outlive their connections.
func (r *Registry) Live(fd int, gen uint32) *Slot {
	s := r.Slot(fd)
	if s == nil || s.gen.Load() != gen || s.State() == Free {
		return nil
	}
	return s
}

// BeginClose moves fd's slot with generation gen to Closing and returns the
// state it left. It returns false if the slot is not that connection or is
// closing already, so only one goroutine ever proceeds to close the fd.
func (r *Registry) BeginClose(fd int, gen uint32) (State, bool) {
	s := r.Slot(fd)
	if s == nil || s.gen.Load() != gen {
		return Free, false
	}
	for {
		st := s.state.Load()
		if st == uint32(Free) || st == uint32(Closing) {
			return State(st), false
		}
		if s.state.CompareAndSwap(st, uint32(Closing)) {
			return State(st), true
		}
	}
}

// Retire bumps the generation of a Closing slot; call it after
// EPOLL_CTL_DEL, so events that are still in flight are stale from here on.
func (r *Registry) Retire(fd int) { r.slots[fd].gen.Add(1) }

// Release frees a retired slot; call it just before close(fd).
func (r *Registry) Release(fd int) {
	r.slots[fd].state.Store(uint32(Free))
	r.open.Add(-1)
}

// Open connections.
func (r *Registry) Len() int { return int(r.open.Load()) }

// Stale is how many events were dropped because their generation was old.
func (r *Registry) Stale() uint64 { return r.stale.Load() }

// CountStale records a stale event found outside Lookup.
func (r *Registry) CountStale() { r.stale.Add(1) }

// View is one live slot as shown on the admin endpoint.
type View struct {
	FD         int    `json:"fd"`
	Gen        uint32 `json:"gen"`
	State      string `json:"state"`
	Proto      uint8  `json:"proto"`
	Loop       int    `json:"loop"`
	Worker     int    `json:"worker"`
	Peer       string `json:"peer"`
	OpenedAt   uint32 `json:"opened_at"`
	LastActive uint32 `json:"last_active"`
	Events     uint32 `json:"events"`
	BytesIn    uint32 `json:"bytes_in"`
	Dropped    uint32 `json:"dropped"`
}

// Snapshot appends up to max live slots to dst. It reads without locks, so
// a slot that changes meanwhile may show a mix of old and new values; it is
// a debugging view.
func (r *Registry) Snapshot(dst []View, max int) []View {
	for fd := range r.slots {
		if len(dst) >= max {
			break
		}
		s := &r.slots[fd]
		st := s.State()
		if st == Free {
			continue
		}
		dst = append(dst, View{
			FD: fd, Gen: s.Gen(), State: st.String(), Proto: s.Proto(),
			Loop: s.Loop(), Worker: s.Worker(), Peer: s.Peer().String(),
			OpenedAt: s.OpenedAt.Load(), LastActive: s.LastActive.Load(),
			Events: s.Events.Load(), BytesIn: s.BytesIn.Load(), Dropped: s.Dropped.Load(),
		})
	}
	return dst
}
