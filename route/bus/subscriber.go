package bus

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// releaseRing gives the emptied queue storage back; s.mu is held, s.n is
// 0 and Drain has zeroed the slots.
func (s *Subscriber) releaseRing() {
	putRing(s.ring)
	s.ring, s.head = nil, 0
}

// Subscriber receives the messages of its filters through a bounded queue.
// Its methods are safe for concurrent use.
type Subscriber struct {
	bus    *Bus
	notify func()
	id     uint64

	// Guarded by bus.trieMu.
	filters  []string
	detached bool // filters removed and the subscriber no longer counted

	mu     sync.Mutex
	queue  int       // queue limit; 0 = Options.Queue
	ring   []Message // nil until the first delivery
	head   int       // index of the oldest queued message
	n      int       // queued messages
	closed bool

	cut     atomic.Bool // set under mu by the Disconnect policy
	dropped atomic.Uint64
}

// NewSubscriber returns a subscriber with no filters. notify, if not nil,
// is called when the queue goes from empty to non-empty and when the
// subscriber is cut off by the Disconnect policy. It runs on the
// publisher's goroutine (or Subscribe's, for a retained replay) with no
// bus lock held, and must not block: signal a channel or Conn.Notify.
// A subscriber counts against MaxSubscribers until it is closed or cut off.
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
// Options.Queue. A queue already longer keeps what it holds.
func (s *Subscriber) SetQueue(n int) {
	s.mu.Lock()
	s.queue = max(n, 0)
	s.mu.Unlock()
}

// Subscribe adds an MQTT filter and queues at once the cached last value
// of every topic it matches, marked Retained (again on a repeated
// Subscribe, as MQTT does). A message is either replayed from the cache or
// delivered live, never both. If the replay overflows the queue under the
// Disconnect policy, the subscriber is cut off and ErrClosed returned.
func (s *Subscriber) Subscribe(filter string) error {
	b := s.bus
	if err := validFilter(filter, b.opt.MaxTopicLen, MaxLevels); err != nil {
		return err
	}
	b.trieMu.Lock()
	if s.detached || s.isClosed() {
		b.trieMu.Unlock()
		return ErrClosed
	}
	if !slices.Contains(s.filters, filter) {
		if len(s.filters) >= b.opt.MaxFilters {
			b.trieMu.Unlock()
			return fmt.Errorf("%w: limit %d", ErrTooManyFilters, b.opt.MaxFilters)
		}
		b.root.insert(filter, s)
		s.filters = append(s.filters, filter)
	}
	// Publishes up to here updated the cache without seeing this filter;
	// later ones will see it. Replay only the former.
	upTo := b.seq.Load()
	b.trieMu.Unlock()
	return s.replay(filter, upTo)
}

// replay queues the cached values matching filter with a sequence up to
// upTo. It pushes under the shard lock so a newer live value of the same
// topic cannot be queued ahead of the older cached one.
func (s *Subscriber) replay(filter string, upTo uint64) error {
	b := s.bus
	var t tally
	var woke, cut bool
	b.eachRetainedLocked(filter, func(m Message) bool {
		if m.Seq > upTo {
			return true
		}
		m.Retained = true
		r, lost := s.push(&m)
		t.dropped += uint64(lost)
		switch r {
		case pushWoke:
			woke = true
			t.delivered++
		case pushQueued:
			t.delivered++
		case pushCut:
			cut = true
		}
		return r != pushCut && r != pushSkipped
	})
	t.flush(b)
	if cut {
		b.disconnected.Add(1)
		s.wake()
		b.detach(s)
		return fmt.Errorf("%w: retained values of %q overflow the queue", ErrClosed, filter)
	}
	if woke {
		s.wake()
	}
	if s.Disconnected() {
		return fmt.Errorf("%w: disconnected", ErrClosed)
	}
	return nil
}

// Unsubscribe removes a filter; removing one not subscribed is not an
// error. A publish already under way may still deliver one message for it.
func (s *Subscriber) Unsubscribe(filter string) error {
	b := s.bus
	if err := validFilter(filter, b.opt.MaxTopicLen, MaxLevels); err != nil {
		return err
	}
	b.trieMu.Lock()
	defer b.trieMu.Unlock()
	if s.detached {
		return ErrClosed
	}
	if i := slices.Index(s.filters, filter); i >= 0 {
		b.root.remove(filter, s)
		s.filters = slices.Delete(s.filters, i, i+1)
	}
	return nil
}

// Filters returns a copy of the subscribed filters.
func (s *Subscriber) Filters() []string {
	s.bus.trieMu.RLock()
	defer s.bus.trieMu.RUnlock()
	return slices.Clone(s.filters)
}

// Drain appends every queued message to dst, oldest first, and empties the
// queue. It never blocks on publishers.
func (s *Subscriber) Drain(dst []Message) []Message {
	s.mu.Lock()
	for i := 0; i < s.n; i++ {
		slot := &s.ring[(s.head+i)%len(s.ring)]
		dst = append(dst, *slot)
		*slot = Message{} // do not pin the payload
	}
	s.n = 0
	s.releaseRing()
	s.mu.Unlock()
	return dst
}

// Len is how many messages are queued.
func (s *Subscriber) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Dropped is how many messages this subscriber lost to the drop policy.
func (s *Subscriber) Dropped() uint64 { return s.dropped.Load() }

// Disconnected reports whether the Disconnect policy cut the subscriber
// off. It then receives nothing more; the owner should Close it.
func (s *Subscriber) Disconnected() bool { return s.cut.Load() }

// Close drops the queue and removes every filter. It is idempotent.
func (s *Subscriber) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.ring, s.head, s.n = nil, 0, 0
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
	b.trieMu.Lock()
	defer b.trieMu.Unlock()
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
// messages were lost doing it.
func (s *Subscriber) push(m *Message) (pushResult, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.cut.Load() {
		return pushSkipped, 0
	}
	if s.n == len(s.ring) && !s.grow() {
		return s.overflow(m)
	}
	s.ring[(s.head+s.n)%len(s.ring)] = *m
	s.n++
	if s.n == 1 {
		return pushWoke, 0
	}
	return pushQueued, 0
}

// overflow applies the drop policy to a full queue; s.mu is held.
func (s *Subscriber) overflow(m *Message) (pushResult, int) {
	switch s.bus.opt.Drop {
	case DropNewest:
		s.dropped.Add(1)
		return pushDropped, 1
	case Disconnect:
		lost := s.n + 1
		s.dropped.Add(uint64(lost))
		s.cut.Store(true)
		s.ring, s.head, s.n = nil, 0, 0
		return pushCut, lost
	default: // DropOldest: the newest takes the oldest's slot
		s.ring[s.head] = *m
		s.head = (s.head + 1) % len(s.ring)
		s.dropped.Add(1)
		return pushQueued, 1
	}
}

// grow enlarges a full ring, keeping order, unless it is at Options.Queue.
func (s *Subscriber) grow() bool {
	limit := s.bus.opt.Queue
	if s.queue > 0 {
		limit = s.queue
	}
	if len(s.ring) >= limit {
		return false
	}
	ring := getRing(min(max(2*len(s.ring), firstRing), limit))
	for i := 0; i < s.n; i++ {
		ring[i] = s.ring[(s.head+i)%len(s.ring)]
	}
	clear(s.ring)
	putRing(s.ring)
	s.ring, s.head = ring, 0
	return true
}
