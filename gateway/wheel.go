package gateway

// wheel is a hashed timing wheel: deadlines for many connections without a
// goroutine or time.Timer each. One wheel belongs to one goroutine (an epoll
// loop or a worker), so it has no locks. Entries are (id, due tick, kind);
// a connection that closes early simply leaves a stale entry behind, which
// is dropped when it fires because its (fd, gen) id no longer resolves.
// A timer that is cancelled or replaced while its connection lives is
// removed (remove): a private session's HELLO timer is cancelled at HELLO,
// and left in place it would hold an entry per idle connection until it
// fired.
type wheel struct {
	buckets [][]timer
	mask    uint64
	now     uint64 // last tick advanced to
	size    int
}

// timer is 16 bytes: an idle connection holds two or three of them (its
// idle check, its session's timer, the sniff deadline until it passes), so
// every byte counts 19,000 times. due is the tick's low 32 bits, compared
// by difference: 2^31 ticks is years at the wheels' 100 ms.
type timer struct {
	id   uint64 // fd<<32 | gen
	due  uint32 // tick, low 32 bits
	kind uint8
}

// Timer kinds.
const (
	timerSniff   uint8 = iota + 1 // sniff deadline passed
	timerIdle                     // idle timeout check
	timerSession                  // a session's SetTimer
)

func newWheel(buckets int, start uint64) *wheel {
	n := 1
	for n < buckets {
		n <<= 1
	}
	return &wheel{buckets: make([][]timer, n), mask: uint64(n - 1), now: start}
}

// add schedules id to fire at tick due (at the next advance if due is past).
func (w *wheel) add(id uint64, due uint64, kind uint8) {
	if due <= w.now {
		due = w.now + 1
	}
	b := &w.buckets[due&w.mask]
	*b = append(*b, timer{id: id, due: uint32(due), kind: kind})
	w.size++
}

// remove takes the entry (id, due, kind) out of the wheel, if it is there,
// and reports whether it was. The bucket is searched from its end, where
// the newest entries are: a timer cancelled soon after it was set (the
// usual case) is found among the few added since. The last entry takes
// the removed one's place; a bucket holds no order among its entries.
// During advance the bucket being walked is out of the wheel, so an entry
// due in it is not found and fires, to be ignored by its owner.
func (w *wheel) remove(id uint64, due uint64, kind uint8) bool {
	b := &w.buckets[due&w.mask]
	list := *b
	for i := len(list) - 1; i >= 0; i-- {
		if e := list[i]; e.id == id && e.due == uint32(due) && e.kind == kind {
			last := len(list) - 1
			list[i] = list[last]
			list[last] = timer{}
			*b = list[:last]
			w.size--
			return true
		}
	}
	return false
}

// advance moves the wheel to tick now and calls fire for every entry that
// is due. fire may add new entries.
func (w *wheel) advance(now uint64, fire func(timer)) {
	// Never walk more than one full turn: every bucket is visited once.
	from := w.now + 1
	if now >= from+uint64(len(w.buckets)) {
		from = now - uint64(len(w.buckets)) + 1
	}
	w.now = now
	for t := from; t <= now; t++ {
		b := &w.buckets[t&w.mask]
		if len(*b) == 0 {
			continue
		}
		// Take the bucket out first: fire may add to it.
		list := *b
		*b = nil
		keep := list[:0]
		for _, e := range list {
			if int32(uint32(now)-e.due) >= 0 { // due <= now, by difference
				w.size--
				fire(e)
			} else {
				keep = append(keep, e)
			}
		}
		if len(keep) > 0 {
			*b = append(*b, keep...)
		} else if *b == nil && cap(list) <= 64 {
			*b = list[:0] // reuse small buckets
		}
	}
}

// len is the number of scheduled entries.
func (w *wheel) len() int { return w.size }
