package quarantine

import "net/netip"

// addrList is a bounded set of addresses kept in insertion order: a map for
// lookup plus a doubly linked list threaded through a slice, so push, remove
// and pop-oldest are O(1) and nothing is allocated once the slice has grown
// to its limit. The book uses one for landing windows (ordered by window
// start) and one for bans (ordered by ban start, which is also expiry order
// because every ban lasts BanFor).
//
// It is not safe for concurrent use; the book guards it.
type addrList struct {
	index      map[netip.Addr]int32
	slots      []addrSlot
	free       []int32
	head, tail int32 // -1 when empty
	limit      int
}

// addrSlot is one tracked address. at is a time in nanoseconds since the
// book's epoch: the window start for landings, the ban end for bans.
type addrSlot struct {
	addr       netip.Addr
	at         int64
	count      int32
	prev, next int32
}

const noSlot = -1

func newAddrList(limit int) *addrList {
	return &addrList{
		index: make(map[netip.Addr]int32),
		head:  noSlot,
		tail:  noSlot,
		limit: limit,
	}
}

func (l *addrList) len() int { return len(l.index) }

func (l *addrList) full() bool { return len(l.index) >= l.limit }

// get returns the slot of a, valid until the next push.
func (l *addrList) get(a netip.Addr) (*addrSlot, bool) {
	i, ok := l.index[a]
	if !ok {
		return nil, false
	}
	return &l.slots[i], true
}

// oldest returns the slot at the front, valid until the next push.
func (l *addrList) oldest() (*addrSlot, bool) {
	if l.head == noSlot {
		return nil, false
	}
	return &l.slots[l.head], true
}

// push appends a at the back. The caller makes room first (see full) and
// makes sure a is not present; push on a full list evicts the oldest so the
// bound holds even if the caller forgets.
func (l *addrList) push(a netip.Addr, at int64) *addrSlot {
	if l.full() {
		l.popOldest()
	}
	i := l.allocSlot()
	l.slots[i] = addrSlot{addr: a, at: at, prev: l.tail, next: noSlot}
	if l.tail != noSlot {
		l.slots[l.tail].next = i
	} else {
		l.head = i
	}
	l.tail = i
	l.index[a] = i
	return &l.slots[i]
}

func (l *addrList) allocSlot() int32 {
	if n := len(l.free); n > 0 {
		i := l.free[n-1]
		l.free = l.free[:n-1]
		return i
	}
	l.slots = append(l.slots, addrSlot{})
	return int32(len(l.slots) - 1)
}

// remove drops a if present.
func (l *addrList) remove(a netip.Addr) {
	i, ok := l.index[a]
	if !ok {
		return
	}
	s := &l.slots[i]
	if s.prev != noSlot {
		l.slots[s.prev].next = s.next
	} else {
		l.head = s.next
	}
	if s.next != noSlot {
		l.slots[s.next].prev = s.prev
	} else {
		l.tail = s.prev
	}
	delete(l.index, a)
	*s = addrSlot{}
	l.free = append(l.free, i)
}

func (l *addrList) popOldest() {
	if s, ok := l.oldest(); ok {
		l.remove(s.addr)
	}
}

// dropUpTo pops from the front while the oldest slot's at is at or before
// t and returns how many it dropped.
func (l *addrList) dropUpTo(t int64) int {
	n := 0
	for {
		s, ok := l.oldest()
		if !ok || s.at > t {
			return n
		}
		l.remove(s.addr)
		n++
	}
}
