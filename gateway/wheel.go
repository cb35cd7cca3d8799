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
//
// A bucket is a chain of fixed chunks of entries, newest first, and chunks
// are recycled through the wheel's free list: a bucket that grows never
// copies itself into a larger array (doubling left as much garbage as it
// kept and up to half its array empty, for 19,000 connections accepted
// within a few ticks), and a walked bucket's chunks serve the next adds.
//
// The bucket array is made at the first add: every worker has a wheel,
// and a worker of a pool that sees no connection (most of them, at a
// site that speaks one or two protocols) would otherwise hold 32 KiB of
// nil pointers that the collector scans and counts as live, letting the
// heap grow twice that before it collects.
type wheel struct {
	buckets []*chunk // nil until the first add
	free    *chunk   // walked chunks, for reuse; at most maxFreeChunks
	nfree   int
	mask    uint64
	now     uint64 // last tick advanced to
	size    int
}

// chunk holds up to chunkLen entries of one bucket: 512 bytes, a size
// class of its own.
type chunk struct {
	e    [chunkLen]timer
	next *chunk // older chunk of the same bucket, or the next free one
	n    int32
}

const (
	chunkLen      = 31
	maxFreeChunks = 1024 // 512 KiB kept for reuse at most; the rest is the collector's
)

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
	return &wheel{mask: uint64(n - 1), now: start}
}

// add schedules id to fire at tick due (at the next advance if due is past).
func (w *wheel) add(id uint64, due uint64, kind uint8) {
	if w.buckets == nil {
		w.buckets = make([]*chunk, w.mask+1)
	}
	if due <= w.now {
		due = w.now + 1
	}
	w.push(&w.buckets[due&w.mask], timer{id: id, due: uint32(due), kind: kind})
	w.size++
}

// push appends e to the bucket whose head is *b.
func (w *wheel) push(b **chunk, e timer) {
	head := *b
	if head == nil || head.n == chunkLen {
		c := w.free
		if c != nil {
			w.free, w.nfree = c.next, w.nfree-1
		} else {
			c = new(chunk)
		}
		c.next, c.n = head, 0
		*b, head = c, c
	}
	head.e[head.n] = e
	head.n++
}

// release puts a walked chunk on the free list, or leaves it to the
// collector when the list is full.
func (w *wheel) release(c *chunk) {
	if w.nfree >= maxFreeChunks {
		return
	}
	c.next, c.n = w.free, 0
	w.free = c
	w.nfree++
}

// remove takes the entry (id, due, kind) out of the wheel, if it is there,
// and reports whether it was. The bucket is searched from its newest
// entries: a timer cancelled soon after it was set (the usual case) is
// found among the few added since. The newest entry takes the removed
// one's place; a bucket holds no order among its entries. During advance
// the bucket being walked is out of the wheel, so an entry due in it is
// not found and fires, to be ignored by its owner.
func (w *wheel) remove(id uint64, due uint64, kind uint8) bool {
	if w.buckets == nil {
		return false
	}
	b := &w.buckets[due&w.mask]
	for c := *b; c != nil; c = c.next {
		for i := c.n - 1; i >= 0; i-- {
			if e := c.e[i]; e.id == id && e.due == uint32(due) && e.kind == kind {
				head := *b
				head.n--
				c.e[i] = head.e[head.n]
				if head.n == 0 {
					*b = head.next
					w.release(head)
				}
				w.size--
				return true
			}
		}
	}
	return false
}

// advance moves the wheel to tick now and calls fire for every entry that
// is due. fire may add and remove entries.
func (w *wheel) advance(now uint64, fire func(timer)) {
	// Never walk more than one full turn: every bucket is visited once
	// (none before the first add).
	from := w.now + 1
	if now >= from+uint64(len(w.buckets)) {
		from = now - uint64(len(w.buckets)) + 1
	}
	w.now = now
	for t := from; t <= now; t++ {
		b := &w.buckets[t&w.mask]
		// Take the bucket out first: fire may add to it.
		c := *b
		*b = nil
		for c != nil {
			for _, e := range c.e[:c.n] {
				if int32(uint32(now)-e.due) >= 0 { // due <= now, by difference
					w.size--
					fire(e)
				} else {
					w.push(b, e) // a later turn's
				}
			}
			next := c.next
			w.release(c)
			c = next
		}
	}
}

// len is the number of scheduled entries.
func (w *wheel) len() int { return w.size }
