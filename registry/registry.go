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
// Close order is fixed: state=Closing (BeginClose), EPOLL_CTL_DEL, gen++
// and state=Free (EndClose), close(fd). The registry provides the state
// steps and refuses them out of order; the gateway does the syscalls in
// between. The slot is freed just before close(fd), not after: the kernel cannot hand the fd number out again
// until close returns, so nobody can claim the slot early, and a loop that
// accepts the reused number a moment later never finds it still Closing.
package registry

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"github.com/edgemux/edgemux/registry/offheap"
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

// Event bits a loop posts for a connection's owner (Post, Take).
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
	ErrStale = errors.New("registry: not the live connection of that fd")
	ErrState = errors.New("registry: not allowed in the slot's state")
)

// Slot is one connection's metadata. Its layout is fixed at 64 bytes so
// that neighbouring slots never share a cache line (a test asserts it).
// Every field is an atomic: the loop writes a slot while workers, other
// loops and the admin view read it, and the race detector must stay quiet.
// The fields are the registry's: others read them through the methods
// below and change them only through Registry methods that check the
// connection's generation.
//
// Times are the gateway's coarse clock: milliseconds, wrapping at about 49
// days, compared by difference.
type Slot struct {
	gen        atomic.Uint32 // bumped at open and at close
	state      atomic.Uint32 // State
	pending    atomic.Uint32 // Ev* bits not yet taken by the owner
	queued     atomic.Uint32 // generation whose event sits in a ring; 0 = none
	lastActive atomic.Uint32 // clock (ms) when the owner last took an event
	events     atomic.Uint32 // events taken, for traffic-pattern learning
	meta       atomic.Uint64 // proto | loop<<8 | worker<<16 | port<<32 | flags<<48
	addrHi     atomic.Uint64 // peer address, IPv4 mapped into IPv6
	addrLo     atomic.Uint64
	openedAt   atomic.Uint32 // clock (ms) at accept
	bytesIn    atomic.Uint32 // bytes read by the owner, wrapping
	dropped    atomic.Uint32 // messages its subscriber lost, wrapping
	wantWrite  atomic.Uint32 // 1 while the owner has output waiting for EPOLLOUT
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

// Proto is the protocol number the sniffer found (sniff.Proto).
func (s *Slot) Proto() uint8 { return uint8(s.meta.Load()) }

// Loop is the index of the epoll loop that accepted the connection.
func (s *Slot) Loop() int { return int(uint8(s.meta.Load() >> 8)) }

// Worker is the index of the owning worker.
func (s *Slot) Worker() int { return int(uint16(s.meta.Load() >> 16)) }

// OpenedAt is the clock (ms) at accept.
func (s *Slot) OpenedAt() uint32 { return s.openedAt.Load() }

// LastActive is the clock (ms) when the owner last took an event.
func (s *Slot) LastActive() uint32 { return s.lastActive.Load() }

// Events is how many events the owner took.
func (s *Slot) Events() uint32 { return s.events.Load() }

// BytesIn is how many bytes the owner read, wrapping.
func (s *Slot) BytesIn() uint32 { return s.bytesIn.Load() }

// Dropped is how many messages the connection's subscriber lost, wrapping.
func (s *Slot) Dropped() uint32 { return s.dropped.Load() }

// WantsWrite reports whether the owner waits for EPOLLOUT: only then does
// a loop pass an EPOLLOUT edge on.
func (s *Slot) WantsWrite() bool { return s.wantWrite.Load() != 0 }

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
	used  atomic.Int32 // one past the highest fd ever opened
	open  atomic.Int64
	stale atomic.Uint64
}

// New makes a registry for fds 0..size-1.
func New(size int) *Registry {
	if size < 1 {
		size = 1
	}
	// A Slot holds no pointers, so the table can live outside the Go heap
	// (offheap: the collector's goal does not grow with it) and be seen
	// as slots through unsafe. Over-allocate and start at the first 64-byte
	// boundary, in case the block came from the heap.
	r := &Registry{}
	buf := offheap.Bytes(r, size*SlotSize+SlotSize)
	off := int(SlotSize-uintptr(unsafe.Pointer(&buf[0]))%SlotSize) % SlotSize
	r.slots = unsafe.Slice((*Slot)(unsafe.Pointer(&buf[off])), size)
	return r
}

// Size is the number of slots.
func (r *Registry) Size() int { return len(r.slots) }

// Used is one past the highest fd ever opened: no slot at or beyond it
// has been opened. Scans of the table (stats, metrics, shutdown) stop
// there. The kernel hands out the lowest free fd, so the connections' fds
// are dense from the bottom; a scan of the whole table once a second
// touched every page of it (1.3 MB at 20,000 slots) before any device
// connected. It never goes down: the pages below it were touched anyway.
func (r *Registry) Used() int { return int(r.used.Load()) }

// Slot returns the slot of fd for reading, or nil when fd is out of range.
func (r *Registry) Slot(fd int) *Slot {
	if uint(fd) >= uint(len(r.slots)) {
		return nil
	}
	return &r.slots[fd]
}

// Open claims fd's slot for a newly accepted connection and returns the
// new generation. The slot must be Free; an fd beyond the table is
// ErrRange (the caller refuses the connection). Generations of open
// connections are always odd (Open and EndClose each add one), so 0 can
// mean "none".
func (r *Registry) Open(fd int, peer netip.AddrPort, loop int, now uint32) (uint32, error) {
	s := r.Slot(fd)
	if s == nil {
		return 0, ErrRange
	}
	if !s.state.CompareAndSwap(uint32(Free), uint32(Sniffing)) {
		return 0, ErrBusy
	}
	s.pending.Store(0)
	s.queued.Store(0)
	s.wantWrite.Store(0)
	s.lastActive.Store(now)
	s.events.Store(0)
	s.bytesIn.Store(0)
	s.dropped.Store(0)
	s.openedAt.Store(now)
	a := peer.Addr()
	var flags uint8
	if a.Is4() {
		flags = flagIPv4
	}
	b := a.As16()
	s.addrHi.Store(binary.BigEndian.Uint64(b[:8]))
	s.addrLo.Store(binary.BigEndian.Uint64(b[8:]))
	s.meta.Store(packMeta(0, uint8(loop), 0, peer.Port(), flags))
	for u := r.used.Load(); int32(fd) >= u; u = r.used.Load() {
		if r.used.CompareAndSwap(u, int32(fd)+1) {
			break
		}
	}
	r.open.Add(1)
	return s.gen.Add(1), nil
}

// Lookup returns fd's slot if it is open with generation gen; otherwise it
// counts a stale event and returns nil.
func (r *Registry) Lookup(fd int, gen uint32) *Slot {
	s := r.Live(fd, gen)
	if s == nil {
		r.stale.Add(1)
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

// Classify records what the sniffer found and who owns the connection
// now: its protocol, its worker, and its state (Active or Quarantined).
// Only a Sniffing connection can be classified, once; the loop that owns
// it calls this before it posts the first event to the worker.
func (r *Registry) Classify(fd int, gen uint32, proto uint8, worker int, st State) error {
	s := r.Live(fd, gen)
	switch {
	case s == nil:
		return ErrStale
	case s.State() != Sniffing || (st != Active && st != Quarantined):
		return ErrState
	}
	m := s.meta.Load()
	s.meta.Store(m&^0xffff_ffff | uint64(proto) | m&0xff00 | uint64(uint16(worker))<<16)
	// Only the owning loop moves a Sniffing slot (on, or to Closing), so
	// the state checked above still holds.
	s.state.Store(uint32(st))
	return nil
}

// Post leaves event bits for the owner of connection (fd, gen) and reports
// whether the caller must queue the connection on its owner's ring: false
// when an event of this generation is queued already, so a ring holds at
// most one entry per live connection and can never overflow.
//
// queued holds the generation whose event is queued. A loop acting on an
// event that went stale while it ran may leave its own old generation
// there; the next Post for the live connection sees a generation that is
// not its own and queues anyway, so a stale event can add a spurious entry
// (dropped by the owner's generation check) but never hold back a live one.
func (r *Registry) Post(fd int, gen uint32, bits uint32) bool {
	s := r.Slot(fd)
	if s == nil {
		return false
	}
	s.pending.Or(bits)
	for {
		q := s.queued.Load()
		if q == gen {
			return false
		}
		if s.queued.CompareAndSwap(q, gen) {
			return true
		}
	}
}

// Take is the owner's side of Post: it clears the queued mark, then takes
// the pending bits, so an edge that arrives after Take queues the
// connection again and nothing that comes during the owner's read to
// EAGAIN is lost. It records the activity (now, in ms) and returns the
// bits and the slot, or a nil slot for a stale event (counted).
func (r *Registry) Take(fd int, gen uint32, now uint32) (uint32, *Slot) {
	s := r.Lookup(fd, gen)
	if s == nil {
		return 0, nil
	}
	s.queued.CompareAndSwap(gen, 0)
	bits := s.pending.Swap(0)
	s.lastActive.Store(now)
	s.events.Add(1)
	return bits, s
}

// SetWantsWrite says whether the owner of (fd, gen) waits for EPOLLOUT.
func (r *Registry) SetWantsWrite(fd int, gen uint32, want bool) {
	if s := r.Live(fd, gen); s != nil {
		var v uint32
		if want {
			v = 1
		}
		s.wantWrite.Store(v)
	}
}

// CountIn adds n bytes read to connection (fd, gen).
func (r *Registry) CountIn(fd int, gen uint32, n int) {
	if s := r.Live(fd, gen); s != nil {
		s.bytesIn.Add(uint32(n))
	}
}

// CountDropped adds n messages that connection (fd, gen) lost.
func (r *Registry) CountDropped(fd int, gen uint32, n int) {
	if s := r.Live(fd, gen); s != nil {
		s.dropped.Add(uint32(n))
	}
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

// EndClose finishes what BeginClose started: the generation moves on, so
// events still in flight are stale from here, and the slot is freed. Call
// it after EPOLL_CTL_DEL and just before close(fd). It reports false, and
// changes nothing, unless fd is connection gen and Closing.
func (r *Registry) EndClose(fd int, gen uint32) bool {
	s := r.Slot(fd)
	if s == nil || s.gen.Load() != gen || s.State() != Closing {
		return false
	}
	s.gen.Add(1)
	s.state.Store(uint32(Free))
	r.open.Add(-1)
	return true
}

// Len is the number of open connections.
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
	OpenedAt   uint32 `json:"opened_at_ms"`   // the gateway's clock, ms
	LastActive uint32 `json:"last_active_ms"` // the gateway's clock, ms
	Events     uint32 `json:"events"`
	BytesIn    uint32 `json:"bytes_in"`
	Dropped    uint32 `json:"dropped"`
}

// Snapshot appends up to max live slots to dst. It reads without locks, so
// a slot that changes meanwhile may show a mix of old and new values; it is
// a debugging view.
func (r *Registry) Snapshot(dst []View, max int) []View {
	for fd := range r.Used() {
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
			OpenedAt: s.OpenedAt(), LastActive: s.LastActive(),
			Events: s.Events(), BytesIn: s.BytesIn(), Dropped: s.Dropped(),
		})
	}
	return dst
}
