package coap

import (
	"container/heap"
	"net/netip"
	"sync/atomic"
	"time"
)

// peer is one UDP endpoint as a worker remembers it: its observations and
// upload (watcher), when it was last heard from, the Message IDs it is
// sent, and its one outstanding confirmable notification (NSTART = 1,
// RFC 7252 section 4.7). Peers without an observation sit on the
// worker's idle list, most recently heard first, to be forgotten when
// idle or when room is needed; observers are not on it and stay until
// their observations end.
type peer struct {
	addr   netip.AddrPort
	w      watcher
	last   time.Time // last request
	mid    uint16    // last Message ID used toward the peer
	wakeFn func()    // the bus subscriber's notify: queues the peer on its worker

	prev, next *peer // the idle list, when idle is set
	idle       bool
	gone       bool        // forgotten: late wakes and timers skip it
	queued     atomic.Bool // on the worker's wake list

	// Confirmable notifications.
	con      *pending  // outstanding, or nil
	conGen   uint32    // bumped when con changes, so stale timers are skipped
	sinceCON int       // notifications sent since the last confirmable one
	lastCON  time.Time // when the last confirmable one was sent (or the peer first seen)
	recent   [4]sent   // the last non-confirmable notifications, for a Reset naming one
	nrecent  uint8
}

// pending is a confirmable notification waiting for its ACK.
type pending struct {
	mid     uint16
	token   [8]byte
	tkl     uint8
	tries   int
	timeout time.Duration
	bytes   []byte
}

// sent is a notification's Message ID and the token of its observation.
type sent struct {
	mid   uint16
	token [8]byte
	tkl   uint8
}

func (p *peer) nextMID() uint16 {
	p.mid++
	return p.mid
}

// remember records a non-confirmable notification, so a Reset that
// names it ends its observation (RFC 7641 section 3.6).
func (p *peer) remember(mid uint16, token []byte) {
	s := &p.recent[p.nrecent%uint8(len(p.recent))]
	s.mid, s.tkl = mid, uint8(copy(s.token[:], token))
	p.nrecent++
}

// tokenOf returns the token of the notification sent with mid.
func (p *peer) tokenOf(mid uint16) ([]byte, bool) {
	if c := p.con; c != nil && c.mid == mid {
		return c.token[:c.tkl], true
	}
	for i := range p.recent {
		if s := &p.recent[i]; s.mid == mid && s.tkl > 0 {
			return s.token[:s.tkl], true
		}
	}
	return nil, false
}

// idleList is a doubly linked list of peers around a sentinel, most
// recent first.
type idleList struct{ root peer }

func (l *idleList) init() { l.root.next, l.root.prev = &l.root, &l.root }

func (l *idleList) pushFront(p *peer) {
	if p.idle {
		l.remove(p)
	}
	p.prev, p.next = &l.root, l.root.next
	l.root.next.prev = p
	l.root.next = p
	p.idle = true
}

func (l *idleList) remove(p *peer) {
	if !p.idle {
		return
	}
	p.prev.next, p.next.prev = p.next, p.prev
	p.prev, p.next, p.idle = nil, nil, false
}

// oldest is the least recently heard idle peer, or nil.
func (l *idleList) oldest() *peer {
	if l.root.prev == &l.root {
		return nil
	}
	return l.root.prev
}

// timer is a retransmission deadline of a peer's confirmable
// notification.
type timer struct {
	at  time.Time
	p   *peer
	gen uint32
}

// timers is a min-heap of deadlines (container/heap).
type timers []timer

func (t timers) Len() int           { return len(t) }
func (t timers) Less(i, j int) bool { return t[i].at.Before(t[j].at) }
func (t timers) Swap(i, j int)      { t[i], t[j] = t[j], t[i] }
func (t *timers) Push(x any)        { *t = append(*t, x.(timer)) }
func (t *timers) Pop() any {
	old := *t
	x := old[len(old)-1]
	old[len(old)-1] = timer{}
	*t = old[:len(old)-1]
	return x
}

func (t *timers) add(at time.Time, p *peer) { heap.Push(t, timer{at: at, p: p, gen: p.conGen}) }
