package rudp

import "math/bits"

// timerNode is a session's place in the timing wheel (intrusive: no
// allocation to schedule).
type timerNode struct {
	next, prev *timerNode
	at         int64 // tick
	level      int8  // -1: not scheduled
	slot       uint8
	conn       *Conn
}

// wheel is a hierarchical timing wheel of 4 levels of 64 slots (1 ms
// ticks: 64 ms, 4.1 s, 4.4 min, 4.7 h), the shape seed 000 describes:
// scheduling and cancelling are O(1), and advancing skips empty slots by
// the occupancy bitmaps. A node sits at the level where its tick and the
// current tick first agree, so it reaches level 0 by cascading exactly
// when its slot's range begins. Timers past the top level fire early and
// are rescheduled by their owner.
type wheel struct {
	cur   int64
	slots [wheelLevels][wheelSlots]*timerNode
	occ   [wheelLevels]uint64
	count int
}

const (
	wheelLevels = 4
	wheelBits   = 6
	wheelSlots  = 1 << wheelBits
	wheelMask   = wheelSlots - 1
	tickNanos   = int64(1e6)
)

// schedule (re)places n to fire at tick at (at least the next tick).
func (w *wheel) schedule(n *timerNode, at int64) {
	if n.level >= 0 {
		w.remove(n)
	}
	w.insert(n, max(at, w.cur+1))
}

func (w *wheel) insert(n *timerNode, at int64) {
	level := 0
	for level < wheelLevels-1 && at>>(wheelBits*(level+1)) != w.cur>>(wheelBits*(level+1)) {
		level++
	}
	slot := uint8(at >> (wheelBits * level) & wheelMask)
	if level == wheelLevels-1 && at-w.cur >= 1<<(wheelBits*wheelLevels) {
		slot = uint8((w.cur>>(wheelBits*level) + wheelMask) & wheelMask) // as far as the wheel reaches
	}
	n.at, n.level, n.slot = at, int8(level), slot
	head := w.slots[level][slot]
	n.prev, n.next = nil, head
	if head != nil {
		head.prev = n
	}
	w.slots[level][slot] = n
	w.occ[level] |= 1 << slot
	w.count++
}

// remove unschedules n (a no-op when it is not scheduled).
func (w *wheel) remove(n *timerNode) {
	if n.level < 0 {
		return
	}
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		w.slots[n.level][n.slot] = n.next
		if n.next == nil {
			w.occ[n.level] &^= 1 << n.slot
		}
	}
	if n.next != nil {
		n.next.prev = n.prev
	}
	n.next, n.prev, n.level = nil, nil, -1
	w.count--
}

// advance moves the wheel to tick now and calls fire for every node due,
// each unscheduled first (fire may schedule it again).
func (w *wheel) advance(now int64, fire func(*timerNode)) {
	for w.cur < now {
		if w.count == 0 {
			w.cur = now
			return
		}
		next := (w.cur | wheelMask) + 1 // the next level-0 rotation
		if rest := w.occ[0] >> (uint64(w.cur&wheelMask) + 1); rest != 0 && w.cur&wheelMask != wheelMask {
			next = w.cur + 1 + int64(bits.TrailingZeros64(rest))
		}
		if next > now {
			w.cur = now
			return
		}
		w.cur = next
		if w.cur&wheelMask == 0 {
			w.cascade()
		}
		w.fireSlot(fire)
	}
}

// cascade moves the nodes of the higher slots whose range begins now
// down the levels.
func (w *wheel) cascade() {
	for level := wheelLevels - 1; level >= 1; level-- {
		if w.cur&(1<<(wheelBits*level)-1) != 0 {
			continue
		}
		slot := uint8(w.cur >> (wheelBits * level) & wheelMask)
		n := w.slots[level][slot]
		w.slots[level][slot] = nil
		w.occ[level] &^= 1 << slot
		for n != nil {
			next := n.next
			w.count--
			n.level = -1
			w.insert(n, max(n.at, w.cur))
			n = next
		}
	}
}

// fireSlot fires the level-0 slot of the current tick.
func (w *wheel) fireSlot(fire func(*timerNode)) {
	slot := uint8(w.cur & wheelMask)
	for {
		n := w.slots[0][slot]
		if n == nil {
			return
		}
		w.remove(n)
		fire(n)
	}
}

// nextTick is the earliest tick at which advance may fire or cascade
// something: exact at level 0, the start of the next occupied slot's range
// above. Only meaningful when count > 0.
func (w *wheel) nextTick() int64 {
	best := int64(-1)
	for level := 0; level < wheelLevels; level++ {
		if w.occ[level] == 0 {
			continue
		}
		shift := wheelBits * level
		cur := w.cur >> shift
		rot := bits.RotateLeft64(w.occ[level], -int(cur&wheelMask+1))
		at := (cur + 1 + int64(bits.TrailingZeros64(rot))) << shift
		if best < 0 || at < best {
			best = at
		}
	}
	return best
}
