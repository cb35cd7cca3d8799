package north

import "time"

// window is a sink's publishes in flight, oldest first: a sliding window
// in place of stop-and-wait. The oldest settles first (the engines
// acknowledge in order on one connection), so the store is acked in
// order, never past a publish the broker has not confirmed.
//
// Publishes that share a Pending share a slot: core NATS settles every
// publish written before one flush (a PING answered by PONG) at once, so
// it hands them all the same Pending, and its window bounds flushes, not
// messages; the publisher does not wait for a flush to send on. Each MQTT
// token and each JetStream PubAck is a slot of its own.
type window struct {
	slots []slot // oldest first; slots[:head] are gone
	head  int
}

// slot is one Pending and the records or messages that wait on it.
type slot struct {
	p       Pending
	last    uint64    // the newest store record in it (0 without a store)
	n       int       // messages in it
	backlog int       // of those, records that waited out an outage
	sent    time.Time // when its first publish went: its ack is due by sent + ackTimeout
}

// len is the number of slots in flight (what the window's bound limits).
func (w *window) len() int { return len(w.slots) - w.head }

// add puts a publish in flight: into the newest slot when it shares that
// slot's Pending, else into a new one.
func (w *window) add(p Pending, seq uint64, backlog bool) {
	if w.len() > 0 {
		if s := &w.slots[len(w.slots)-1]; sameFlush(s.p, p) {
			s.last, s.n = seq, s.n+1
			if backlog {
				s.backlog++
			}
			return
		}
	}
	if w.head > 0 && w.head == len(w.slots) { // empty: reuse the array from its start
		w.slots, w.head = w.slots[:0], 0
	} else if w.head > 1024 && w.head*2 > len(w.slots) { // mostly gone: move the rest down
		w.slots = w.slots[:copy(w.slots, w.slots[w.head:])]
		w.head = 0
	}
	s := slot{p: p, last: seq, n: 1, sent: time.Now()}
	if backlog {
		s.backlog = 1
	}
	w.slots = append(w.slots, s)
}

// sameFlush reports whether a and b are one core NATS flush. Only those
// are merged: other Pendings are one publish each (and comparing
// arbitrary interface values could panic).
func sameFlush(a, b Pending) bool {
	fa, ok := a.(*flushPending)
	return ok && fa == b
}

// oldest is the slot that settles next; the window must not be empty.
func (w *window) oldest() *slot { return &w.slots[w.head] }

// pop drops the oldest slot.
func (w *window) pop() {
	w.slots[w.head] = slot{}
	w.head++
}

// done reports whether the oldest slot has settled (false when empty).
func (w *window) done() bool {
	if w.len() == 0 {
		return false
	}
	return settledNow(w.oldest().p)
}

// poller is a Pending that can tell it has settled without a channel
// (JetStream's: its Done starts a goroutine).
type poller interface{ poll() bool }

// settledNow reports whether p has settled, without waiting.
func settledNow(p Pending) bool {
	if pp, ok := p.(poller); ok {
		return pp.poll()
	}
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// reset forgets every slot (the link went down: their outcomes no longer
// matter, the store sends them again).
func (w *window) reset() {
	clear(w.slots)
	w.slots, w.head = w.slots[:0], 0
}
