// Package bus is the topic bus behind every protocol: publishers on any
// protocol reach subscribers on every other, and a last-value cache (LVC)
// keeps the newest message of each topic so a late reader can Get it and a
// new subscription receives it at once, like an MQTT retained message.
//
// Topics and filters follow MQTT: levels separated by "/", "+" matches one
// level, a final "#" matches the rest, and "$" topics escape top-level
// wildcards. Subscriptions live in a trie under a read-write lock, so a
// Publish takes only a read lock to find its subscribers; the LVC is
// sharded by topic hash so publishers on different topics rarely meet on
// one lock. Every subscriber has its own bounded queue: a publisher never
// blocks, and when a queue is full the drop policy decides who loses.
//
// Lock order, outermost first: the trie lock, an LVC shard lock, a
// subscriber's queue lock. Notify callbacks run with no lock held.
package bus

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Errors returned by the bus, wrapped with details.
var (
	ErrInvalidTopic       = errors.New("bus: invalid topic")
	ErrInvalidFilter      = errors.New("bus: invalid filter")
	ErrPayloadTooLarge    = errors.New("bus: payload too large")
	ErrTooManyFilters     = errors.New("bus: too many filters")
	ErrTooManySubscribers = errors.New("bus: too many subscribers")
	ErrClosed             = errors.New("bus: subscriber closed")
	ErrInvalidDropPolicy  = errors.New("bus: invalid drop policy")
)

// Message is one published value. Its Payload belongs to the bus once
// published and is shared by every subscriber: nobody may modify it.
type Message struct {
	Topic    string
	Payload  []byte
	Src      string // protocol it came from: "private", "modbus", "coap", "ws", ...
	TS       int64  // unix nanoseconds at publish (from Options.Now)
	Seq      uint64 // bus-wide publish sequence, starting at 1
	Retained bool   // delivered from the LVC by Subscribe, not live
}

// DropPolicy says what happens when a subscriber's queue is full.
type DropPolicy uint8

// The drop policies.
const (
	DropOldest DropPolicy = iota // evict the oldest queued message
	DropNewest                   // drop the incoming message
	Disconnect                   // cut the subscriber off and drop its queue
)

var dropPolicyNames = [...]string{DropOldest: "oldest", DropNewest: "newest", Disconnect: "disconnect"}

// ParseDropPolicy reads "oldest", "newest" or "disconnect"; "" means the
// default, DropOldest.
func ParseDropPolicy(s string) (DropPolicy, error) {
	if s == "" {
		return DropOldest, nil
	}
	for p, name := range dropPolicyNames {
		if s == name {
			return DropPolicy(p), nil
		}
	}
	return DropOldest, fmt.Errorf("%w: %q (want oldest, newest or disconnect)", ErrInvalidDropPolicy, s)
}

// String returns the name ParseDropPolicy reads.
func (p DropPolicy) String() string {
	if int(p) < len(dropPolicyNames) {
		return dropPolicyNames[p]
	}
	return fmt.Sprintf("DropPolicy(%d)", uint8(p))
}

// Defaults for zero (or negative) Options fields.
const (
	DefaultMaxTopics      = 100000
	DefaultMaxPayload     = 65536
	DefaultQueue          = 256
	DefaultMaxFilters     = 64
	DefaultMaxSubscribers = 100000
)

// Options limit the bus. Zero fields take the defaults above.
type Options struct {
	MaxTopics      int          // retained topics; past it new topics are published but not retained
	MaxPayload     int          // bytes per message
	MaxTopicLen    int          // bytes per topic or filter (at most 65535); levels are capped at MaxLevels
	Queue          int          // messages per subscriber queue
	MaxFilters     int          // filters per subscriber
	MaxSubscribers int          // subscribers in all
	Drop           DropPolicy   // for every subscriber's full queue; unknown values mean DropOldest
	Now            func() int64 // clock for Message.TS; default time.Now().UnixNano
}

func (o Options) withDefaults() Options {
	orDefault := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	orDefault(&o.MaxTopics, DefaultMaxTopics)
	orDefault(&o.MaxPayload, DefaultMaxPayload)
	orDefault(&o.MaxTopicLen, DefaultMaxTopicLen)
	orDefault(&o.Queue, DefaultQueue)
	orDefault(&o.MaxFilters, DefaultMaxFilters)
	orDefault(&o.MaxSubscribers, DefaultMaxSubscribers)
	o.MaxTopicLen = min(o.MaxTopicLen, maxTopicLenCap)
	if int(o.Drop) >= len(dropPolicyNames) {
		o.Drop = DropOldest
	}
	if o.Now == nil {
		o.Now = func() int64 { return time.Now().UnixNano() }
	}
	return o
}

// Stats are the bus counters since New.
type Stats struct {
	Published    uint64 // messages accepted by Publish
	Rejected     uint64 // Publish calls refused (bad topic, payload too large)
	Delivered    uint64 // messages queued to subscribers, retained ones included
	Dropped      uint64 // messages subscribers lost to their drop policy
	Disconnected uint64 // subscribers cut off by the Disconnect policy
	Unretained   uint64 // publishes to new topics past MaxTopics, not cached
	Subscribers  int    // live subscribers
	Topics       int    // topics in the last-value cache
}

// shardCount spreads the LVC over this many locks; a power of two.
const shardCount = 64

// shard is one slice of the LVC, padded to its own cache line.
type shard struct {
	mu sync.RWMutex
	m  map[string]Message
	_  [64 - unsafe.Sizeof(sync.RWMutex{}) - unsafe.Sizeof(map[string]Message(nil))]byte // 32 on 64-bit, 36 on 32-bit targets
}

// Bus is the topic bus. Its methods are safe for concurrent use.
type Bus struct {
	opt  Options
	seed maphash.Seed

	trieMu sync.RWMutex
	root   node // guarded by trieMu, as are Subscriber.filters and .detached

	shards [shardCount]shard

	seq          atomic.Uint64
	topics       atomic.Int64
	subscribers  atomic.Int64
	nextSubID    atomic.Uint64
	published    atomic.Uint64
	rejected     atomic.Uint64
	delivered    atomic.Uint64
	dropped      atomic.Uint64
	disconnected atomic.Uint64
	unretained   atomic.Uint64
}

// New returns an empty bus; zero Options fields take their defaults.
func New(o Options) *Bus {
	b := &Bus{opt: o.withDefaults(), seed: maphash.MakeSeed()}
	for i := range b.shards {
		b.shards[i].m = make(map[string]Message)
	}
	return b
}

// Options returns the options in effect, defaults filled in.
func (b *Bus) Options() Options { return b.opt }

// Publish validates the topic and payload, copies the payload once,
// records the message as the topic's last value and queues it to every
// matching subscriber (once each, however many of its filters match). It
// never blocks on a subscriber: full queues follow the drop policy.
func (b *Bus) Publish(topic string, payload []byte, src string) error {
	if err := validTopic(topic, b.opt.MaxTopicLen, MaxLevels); err != nil {
		b.rejected.Add(1)
		return err
	}
	if len(payload) > b.opt.MaxPayload {
		b.rejected.Add(1)
		return fmt.Errorf("%w: %d bytes, limit %d", ErrPayloadTooLarge, len(payload), b.opt.MaxPayload)
	}
	m := Message{Topic: topic, Src: src, TS: b.opt.Now()}
	if len(payload) > 0 {
		m.Payload = append(make([]byte, 0, len(payload)), payload...)
	}
	c := collectorPool.Get().(*collector)
	// Sequence and cache update happen under the trie read lock, so a
	// Subscribe (write lock) splits publishes cleanly into those it must
	// replay from the cache and those that will reach it live.
	b.trieMu.RLock()
	b.store(&m)
	b.root.collect(topic, c)
	b.trieMu.RUnlock()
	b.fanOut(&m, c)
	c.reset()
	collectorPool.Put(c)
	b.published.Add(1)
	return nil
}

func (b *Bus) shardFor(topic string) *shard {
	return &b.shards[maphash.String(b.seed, topic)&(shardCount-1)]
}

// store assigns the sequence number and updates the LVC. Assigning the
// sequence under the shard lock keeps each topic's cached value the one
// with the highest sequence.
func (b *Bus) store(m *Message) {
	sh := b.shardFor(m.Topic)
	sh.mu.Lock()
	m.Seq = b.seq.Add(1)
	if _, ok := sh.m[m.Topic]; ok || b.reserveTopic() {
		sh.m[m.Topic] = *m
	} else {
		b.unretained.Add(1)
	}
	sh.mu.Unlock()
}

// reserveTopic counts a new cached topic unless MaxTopics is reached.
func (b *Bus) reserveTopic() bool {
	if b.topics.Add(1) <= int64(b.opt.MaxTopics) {
		return true
	}
	b.topics.Add(-1)
	return false
}

// fanOut queues m to the collected subscribers, outside the trie lock so
// notify callbacks and disconnects may take it.
func (b *Bus) fanOut(m *Message, c *collector) {
	c.dedupe()
	var t tally
	for _, s := range c.single {
		t.settle(b, s, m)
	}
	for _, s := range c.multi {
		t.settle(b, s, m)
	}
	t.flush(b)
}

// tally batches counter updates so a fan-out touches the shared counters
// once, not once per subscriber.
type tally struct {
	delivered, dropped uint64
}

// settle pushes m to s and does what the outcome asks: notify, count,
// disconnect.
func (t *tally) settle(b *Bus, s *Subscriber, m *Message) {
	r, lost := s.push(m)
	t.dropped += uint64(lost)
	switch r {
	case pushWoke:
		t.delivered++
		s.wake()
	case pushQueued:
		t.delivered++
	case pushCut:
		b.disconnected.Add(1)
		s.wake()
		b.detach(s)
	}
}

func (t *tally) flush(b *Bus) {
	if t.delivered > 0 {
		b.delivered.Add(t.delivered)
	}
	if t.dropped > 0 {
		b.dropped.Add(t.dropped)
	}
}

// Get returns the last value published on topic.
func (b *Bus) Get(topic string) (Message, bool) {
	sh := b.shardFor(topic)
	sh.mu.RLock()
	m, ok := sh.m[topic]
	sh.mu.RUnlock()
	return m, ok
}

// Forget removes topic from the LVC, freeing its place under MaxTopics.
// It reports whether the topic was cached.
func (b *Bus) Forget(topic string) bool {
	sh := b.shardFor(topic)
	sh.mu.Lock()
	_, ok := sh.m[topic]
	if ok {
		delete(sh.m, topic)
		b.topics.Add(-1)
	}
	sh.mu.Unlock()
	return ok
}

// Retained calls fn with each cached last value matching filter, until fn
// returns false. fn runs with no lock held, so it may publish; values
// published meanwhile may or may not be seen. An invalid filter matches
// nothing. Order is unspecified.
func (b *Bus) Retained(filter string, fn func(Message) bool) {
	if validFilter(filter, b.opt.MaxTopicLen, MaxLevels) != nil {
		return
	}
	if !hasWildcard(filter) {
		if m, ok := b.Get(filter); ok {
			fn(m)
		}
		return
	}
	var batch []Message
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.RLock()
		for topic, m := range sh.m {
			if matchValid(filter, topic) {
				batch = append(batch, m)
			}
		}
		sh.mu.RUnlock()
		for _, m := range batch {
			if !fn(m) {
				return
			}
		}
		clear(batch)
		batch = batch[:0]
	}
}

// eachRetainedLocked is Retained for the bus itself: fn runs under the
// shard lock, so no publish to that shard can slip between the read and
// what fn does with it. fn must not take bus locks.
func (b *Bus) eachRetainedLocked(filter string, fn func(Message) bool) {
	if !hasWildcard(filter) {
		sh := b.shardFor(filter)
		sh.mu.RLock()
		if m, ok := sh.m[filter]; ok {
			fn(m)
		}
		sh.mu.RUnlock()
		return
	}
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.RLock()
		more := true
		for topic, m := range sh.m {
			if matchValid(filter, topic) {
				if more = fn(m); !more {
					break
				}
			}
		}
		sh.mu.RUnlock()
		if !more {
			return
		}
	}
}

// Stats returns a snapshot of the counters.
func (b *Bus) Stats() Stats {
	return Stats{
		Published:    b.published.Load(),
		Rejected:     b.rejected.Load(),
		Delivered:    b.delivered.Load(),
		Dropped:      b.dropped.Load(),
		Disconnected: b.disconnected.Load(),
		Unretained:   b.unretained.Load(),
		Subscribers:  int(b.subscribers.Load()),
		Topics:       int(b.topics.Load()),
	}
}

// collector gathers one publish's subscribers. Subscribers with a single
// filter can be reached only once per topic (each trie node is reached by
// one path), so only those with several filters need de-duplication.
type collector struct {
	single []*Subscriber
	multi  []*Subscriber
}

var collectorPool = sync.Pool{New: func() any { return new(collector) }}

// add runs under the trie read lock, which guards Subscriber.filters.
func (c *collector) add(subs []*Subscriber) {
	for _, s := range subs {
		if len(s.filters) > 1 {
			c.multi = append(c.multi, s)
		} else {
			c.single = append(c.single, s)
		}
	}
}

func (c *collector) dedupe() {
	if len(c.multi) > 1 {
		slices.SortFunc(c.multi, func(x, y *Subscriber) int { return cmp.Compare(x.id, y.id) })
		c.multi = slices.Compact(c.multi)
	}
}

// reset empties the collector, dropping its references to subscribers.
func (c *collector) reset() {
	clear(c.single)
	clear(c.multi)
	c.single, c.multi = c.single[:0], c.multi[:0]
}
