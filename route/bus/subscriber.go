package bus

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// Subscriber receives the messages of its filters through a bounded queue.
// Its methods are safe for concurrent use.
//
// Fields are ordered to pack (160 bytes): every subscribed connection has
// one.
type Subscriber struct {
	bus     *Bus
	notify  func()
	id      uint64
	filters []string // guarded by bus.trie

	mu      sync.Mutex
	drainMu sync.Mutex // held by a Drain that continues replays: it owns their cursors

	// Guarded by mu.
	ring    []run     // nil until the first delivery; its messages are shared with the other subscribers
	replays []*replay // retained replays not finished, oldest first
	bytes   int       // what the queued messages count against QueueBytes
	lost    uint64    // dropped since the last Drain reported it

	dropped atomic.Uint64
	queue   int32       // queue limit in messages, guarded by mu; 0 = Options.Queue
	head    int32       // index of the oldest run, guarded by mu
	runs    int32       // runs in the ring, guarded by mu
	n       int32       // queued messages, guarded by mu
	cut     atomic.Bool // set under mu by the Disconnect policy

	detached bool // guarded by bus.trie: filters removed, no longer counted
	closed   bool // guarded by mu
	recycles bool // guarded by bus.trie: the owner Releases what it drains (payload.go)
}

// NewSubscriber returns a subscriber with no filters. notify, if not nil,
// is called when the subscriber goes from having nothing for its owner
// to having something (a message queued into an empty queue, a retained
// replay begun) and when it is cut off by the Disconnect policy. It runs
// on the publisher's (or Subscribe's) goroutine with no bus lock held, and
// must not block: signal a channel or Conn.Notify. After a Drain that
// reports More, no notify comes for what is left: the owner drains again
// when it can take more. A subscriber counts against MaxSubscribers until
// it is closed or cut off.
func (b *Bus) NewSubscriber(notify func()) (*Subscriber, error) {
	for {
		n := b.subscribers.Load()
		if n >= int64(b.opt.MaxSubscribers) {
			return nil, fmt.Errorf("%w: limit %d", ErrTooManySubscribers, b.opt.MaxSubscribers)
		}
		if b.subscribers.CompareAndSwap(n, n+1) {
			break
		}
	}
	return &Subscriber{bus: b, notify: notify, id: b.nextSubID.Add(1)}, nil
}

// SetQueue sets this subscriber's queue limit (messages), for protocols
// whose configuration sizes their own queues; n <= 0 restores
// Options.Queue. Options.QueueBytes applies either way. A queue already
// longer keeps what it holds.
func (s *Subscriber) SetQueue(n int) {
	s.mu.Lock()
	s.queue = int32(min(max(n, 0), math.MaxInt32))
	s.mu.Unlock()
}

// Subscribe adds an MQTT filter and starts the replay of the cached last
// value of every topic it matches (Drain delivers them, marked Retained).
// A filter the subscriber already holds changes nothing and is not
// replayed again. A message is either replayed or delivered live, never
// both, and a topic's retained value never follows a newer live one.
func (s *Subscriber) Subscribe(filter string) error { return s.subscribe(filter, true) }

// SubscribeLive adds a filter without the retained replay.
func (s *Subscriber) SubscribeLive(filter string) error { return s.subscribe(filter, false) }

func (s *Subscriber) subscribe(filter string, replay bool) error {
	b := s.bus
	if err := validFilter(filter, b.opt.MaxTopicLen, MaxLevels); err != nil {
		return err
	}
	b.trie.Lock()
	if s.detached || s.isClosed() {
		b.trie.Unlock()
		return ErrClosed
	}
	if slices.Contains(s.filters, filter) {
		b.trie.Unlock()
		return nil
	}
	if len(s.filters) >= b.opt.MaxFilters {
		b.trie.Unlock()
		return fmt.Errorf("%w: limit %d", ErrTooManyFilters, b.opt.MaxFilters)
	}
	b.root.insert(filter, s)
	s.filters = append(s.filters, filter)
	// Publishes up to here updated the cache without seeing this filter;
	// later ones will see it. Replay only the former: per shard, up to
	// the number its sequence has reached.
	var upTo replayBound
	if replay {
		upTo = b.replayBound(filter)
	}
	b.trie.Unlock()
	if replay && (upTo.shards != nil || b.cachedBy(filter, upTo.one)) {
		s.startReplay(filter, upTo)
	}
	return nil
}

// Unsubscribe removes a filter and stops its replay; removing one not
// subscribed is not an error. A publish already under way may still
// deliver one message for it.
func (s *Subscriber) Unsubscribe(filter string) error {
	b := s.bus
	if err := validFilter(filter, b.opt.MaxTopicLen, MaxLevels); err != nil {
		return err
	}
	b.trie.Lock()
	defer b.trie.Unlock()
	if s.detached {
		return ErrClosed
	}
	if i := slices.Index(s.filters, filter); i >= 0 {
		b.root.remove(filter, s)
		s.filters = slices.Delete(s.filters, i, i+1)
		s.stopReplay(filter)
	}
	return nil
}

// Filters returns a copy of the subscribed filters.
func (s *Subscriber) Filters() []string {
	rl := s.bus.trie.reader(0)
	rl.RLock()
	defer rl.RUnlock()
	return slices.Clone(s.filters)
}

// Len is how many messages are queued (retained values still to replay
// aside).
func (s *Subscriber) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.n)
}

// Dropped is how many messages this subscriber lost to the drop policy.
func (s *Subscriber) Dropped() uint64 { return s.dropped.Load() }

// Disconnected reports whether the Disconnect policy cut the subscriber
// off. It then receives nothing more; the owner should Close it.
func (s *Subscriber) Disconnected() bool { return s.cut.Load() }

// Close drops the queue and pending replays and removes every filter. It
// is idempotent.
func (s *Subscriber) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.dropQueue()
	s.mu.Unlock()
	s.bus.detach(s)
}

func (s *Subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed || s.cut.Load()
}

func (s *Subscriber) wake() {
	if s.notify != nil {
		s.notify()
	}
}

// detach removes all of s's filters and stops counting it, once.
func (b *Bus) detach(s *Subscriber) {
	b.trie.Lock()
	defer b.trie.Unlock()
	if s.detached {
		return
	}
	for _, f := range s.filters {
		b.root.remove(f, s)
	}
	s.filters = nil
	s.detached = true
	b.subscribers.Add(-1)
}

// pushResult is what happened to one message offered to a subscriber.
type pushResult uint8

const (
	pushQueued  pushResult = iota // queued behind others (or after evicting the oldest)
	pushWoke                      // queued into an empty queue: notify
	pushDropped                   // the incoming message was dropped (DropNewest)
	pushCut                       // the queue was full: subscriber disconnected
	pushSkipped                   // the subscriber is closed or already cut off
)

// push offers m to the queue and returns what happened and how many
// messages were lost doing it. A message always fits an empty queue,
// however big. The queue keeps m itself, shared with the other
// subscribers of the publish, so nobody may modify it.
func (s *Subscriber) push(m *Message) (pushResult, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.cut.Load() {
		return pushSkipped, 0
	}
	size, lost := m.size(), 0
	// At the limit in messages, one goes to make room: a queue that
	// SetQueue left longer than its limit keeps what it holds.
	overLimit := int(s.n) >= s.limit()
	for s.n > 0 && (overLimit || s.bytes+size > s.bus.opt.QueueBytes) {
		switch s.bus.opt.Drop {
		case DropNewest:
			s.countLost(1)
			return pushDropped, 1
		case Disconnect:
			lost := int(s.n) + 1
			s.countLost(lost)
			s.cut.Store(true)
			s.dropQueue()
			return pushCut, lost
		}
		old := s.takeOldest() // DropOldest
		old.buf.unref()
		release(old)
		lost++
		overLimit = false
	}
	s.countLost(lost)
	s.append(m)
	s.n++
	s.bytes += size
	if s.n == 1 {
		return pushWoke, lost
	}
	return pushQueued, lost
}

// countLost records n dropped messages; s.mu is held.
func (s *Subscriber) countLost(n int) {
	if n > 0 {
		s.lost += uint64(n)
		s.dropped.Add(uint64(n))
	}
}

// limit is the queue's bound in messages; s.mu is held. It never exceeds
// what QueueBytes holds (each message counts msgOverhead), nor, so, does
// the ring.
func (s *Subscriber) limit() int {
	limit := s.bus.opt.Queue
	if s.queue > 0 {
		limit = int(s.queue)
	}
	return min(limit, max(s.bus.opt.QueueBytes/msgOverhead, 1))
}

// append queues m behind the newest message, extending the last run when
// m comes next in its chain (chain.go), else in a run of its own,
// growing the ring (keeping order) if it is full; s.mu is held.
func (s *Subscriber) append(m *Message) {
	if s.runs > 0 {
		if last := &s.ring[(int(s.head)+int(s.runs)-1)%len(s.ring)]; last.extendsTo(m) {
			last.last = m
			return
		}
	}
	if int(s.runs) == len(s.ring) {
		size := max(min(max(2*len(s.ring), firstRing), s.limit()), int(s.runs)+1)
		ring := getRing(size)
		for i := range int(s.runs) {
			ring[i] = s.ring[(int(s.head)+i)%len(s.ring)]
		}
		clear(s.ring)
		putRing(s.ring)
		s.ring, s.head = ring, 0
	}
	s.ring[(int(s.head)+int(s.runs))%len(s.ring)] = run{first: m, last: m}
	s.runs++
}

// takeOldest removes the oldest queued message from the queue and
// returns it; s.mu is held, s.n > 0. The caller releases it once done
// with it (encoding.go).
func (s *Subscriber) takeOldest() *Message {
	r := &s.ring[s.head]
	m := r.first
	if m == r.last {
		*r = run{} // do not pin the messages
		s.head = int32((int(s.head) + 1) % len(s.ring))
		s.runs--
	} else {
		r.first = m.ext.next.Load()
	}
	s.n--
	s.bytes -= m.size()
	return m
}

// releaseRing gives the emptied queue storage back; s.mu is held, s.n is
// 0 and the entries are zero.
func (s *Subscriber) releaseRing() {
	putRing(s.ring)
	s.ring, s.head = nil, 0
}

// dropQueue forgets every queued message and replay; s.mu is held.
func (s *Subscriber) dropQueue() {
	s.ring, s.head, s.runs, s.n, s.bytes, s.replays = nil, 0, 0, 0, 0, nil
}
