// Package bus is the topic bus behind every protocol: publishers on any
// protocol reach subscribers on every other, and a last-value cache (LVC)
// keeps the newest message of each topic so a late reader can Get it and a
// new subscription receives it, like an MQTT retained message.
//
// Topics and filters follow MQTT: levels separated by "/", "+" matches one
// level, a final "#" matches the rest, and "$" topics escape top-level
// wildcards. Subscriptions live under a read-write lock, filters without
// wildcards by the topic they match and the others in a trie (filter.go),
// so a Publish takes only a read lock to find its subscribers. That lock
// is striped (trielock.go) and the LVC sharded by topic hash (cache.go),
// so publishers on different topics, on different cores, rarely meet on
// one lock or write one cache line.
//
// The bus never returns a wrong value and never loses one silently. A
// publish whose value cannot be kept (a new topic in a full cache, or past
// its publisher's quota of new topics) is refused with an error, never
// half done; topics reserved for what the configuration serves always keep
// their value. Every subscriber has its own queue, bounded in messages and
// in bytes: a publisher never blocks, and when a queue is full the drop
// policy decides who loses, counted per subscriber and reported by the
// next Drain so the owner can tell its peer. A new subscription's retained
// values are not queued at once: Drain reads them from the cache a bounded
// piece at a time, as the subscriber takes them (replay.go).
//
// Lock order, outermost first: the trie lock (a writer takes every
// stripe, in order; a reader one), an LVC shard lock, a subscriber's queue
// lock. Notify callbacks run with no lock held.
package bus

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/cpu"
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
	ErrCacheFull          = errors.New("bus: last-value cache full")
	ErrTopicQuota         = errors.New("bus: quota of new topics spent")
)

// Message is one published value. Its Payload belongs to the bus once
// published and is shared by every subscriber: nobody may modify it. So
// are its encodings (encoding.go): what one subscriber's protocol framed,
// the next subscriber of that protocol reuses.
type Message struct {
	Topic    string
	Payload  []byte
	Src      string      // protocol it came from: "private", "modbus", "coap", "ws", ...
	TS       int64       // unix nanoseconds at publish (from Options.Now)
	Seq      uint64      // the publish's number in its topic's cache shard, from 1: grows with each publish to the topic, unique within it
	ext      *sharedExt  // encodings and chain, shared by every copy of a published message; nil for one built by hand
	buf      *payloadBuf // the pooled array Payload lies in, counted (payload.go); nil: the collector's
	Retained bool        // replayed from the LVC for a new subscription, not live
}

// msgOverhead is what a queued message counts against QueueBytes besides
// its topic and payload. It is the size a queue slot had when the queue
// held copies (80 bytes), kept fixed so that Queue and QueueBytes limit
// exactly what they did: the queues hold the published message itself, shared,
// and a burst to one topic as one run of it (ring.go, chain.go).
const msgOverhead = 80

// size is what m counts against a queue's byte limit.
func (m *Message) size() int { return msgOverhead + len(m.Topic) + len(m.Payload) }

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
	DefaultTopicQuota     = 1000
	DefaultMaxPayload     = 65536
	DefaultQueue          = 65536
	DefaultQueueBytes     = 4 << 20
	DefaultMaxFilters     = 64
	DefaultMaxSubscribers = 100000
)

// Options limit the bus. Zero fields take the defaults above.
type Options struct {
	MaxTopics      int          // cached topics, reserved ones aside; a publish that would add one more is refused (ErrCacheFull)
	TopicQuota     int          // new topics one Quota (a connection) may add to the cache (ErrTopicQuota)
	MaxPayload     int          // bytes per message
	MaxTopicLen    int          // bytes per topic or filter (at most 65535); levels are capped at MaxLevels
	Queue          int          // messages per subscriber queue
	QueueBytes     int          // bytes per subscriber queue: topic, payload and 80 bytes of slot per message
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
	orDefault(&o.TopicQuota, DefaultTopicQuota)
	o.TopicQuota = min(o.TopicQuota, math.MaxInt32) // Quota counts in 32 bits
	orDefault(&o.QueueBytes, DefaultQueueBytes)
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
	Rejected     uint64 // Publish calls refused for bad input (bad topic, payload too large)
	CacheFull    uint64 // Publish calls refused: a new topic, and the cache at MaxTopics
	OverQuota    uint64 // Publish calls refused: a new topic past the publisher's TopicQuota
	Delivered    uint64 // messages queued to subscribers, and retained values replayed to them
	Dropped      uint64 // messages subscribers lost to their drop policy
	Disconnected uint64 // subscribers cut off by the Disconnect policy
	Subscribers  int    // live subscribers
	Topics       int    // cached topics counted against MaxTopics (reserved ones aside)
	Reserved     int    // reserved topics, with or without a value
}

// shardCount spreads the LVC over this many locks; a power of two.
const shardCount = 64

// Bus is the topic bus. Its methods are safe for concurrent use.
//
// Its layout keeps what every publish writes off the cache lines of what
// the others only read, and off each other's where it can: the workers
// publish on all cores at once, and a line that two of them write moves
// between their caches on every publish. Each shard is a line apart from
// the next (shard) and numbers its topics' publishes and counts their
// deliveries (shardData); the trie's lock is striped (trieLock), a line
// apart from what follows it.
type Bus struct {
	shards [shardCount]shard
	trie   trieLock // guards root, as well as Subscriber.filters and .detached
	_      cpu.CacheLinePad

	opt  Options
	seed maphash.Seed

	root subscriptions // guarded by trie

	resMu    sync.Mutex
	reserved map[string][]string // owner -> its reserved topics, sorted

	claimMu sync.Mutex // serialises Claim calls (claim.go)
	claimState

	topics       atomic.Int64
	reservedN    atomic.Int64
	subscribers  atomic.Int64
	nextSubID    atomic.Uint64
	rejected     atomic.Uint64
	cacheFull    atomic.Uint64
	overQuota    atomic.Uint64
	replayed     atomic.Uint64 // retained values delivered by replays (live deliveries are counted per shard)
	disconnected atomic.Uint64
}

// New returns an empty bus; zero Options fields take their defaults.
func New(o Options) *Bus {
	b := &Bus{opt: o.withDefaults(), seed: maphash.MakeSeed(), reserved: map[string][]string{}}
	for i := range b.shards {
		b.shards[i].m = make(map[string]*entry)
	}
	return b
}

// Options returns the options in effect, defaults filled in.
func (b *Bus) Options() Options { return b.opt }

// Publish is PublishWithin without a quota, for the gateway's own
// publishers (its stats, say); connections publish within theirs.
func (b *Bus) Publish(topic string, payload []byte, src string) error {
	return b.PublishWithin(nil, topic, payload, src)
}

// PublishWithin validates the topic and payload, records the message as
// the topic's last value and queues it to every matching subscriber (once
// each, however many of its filters match). It never blocks on a
// subscriber: full queues follow the drop policy. A message whose value
// the cache cannot keep is refused whole, neither cached nor delivered:
// ErrCacheFull for a new topic when the cache is full, ErrTopicQuota for
// a new topic past q's quota (q may be nil: no quota). Reserved topics are
// never refused for either. The payload is copied once. A publish to a
// topic a Writer claimed, by anyone but its owner, goes to the Writer
// instead (claim.go) and returns its verdict.
func (b *Bus) PublishWithin(q *Quota, topic string, payload []byte, src string) error {
	return b.PublishDone(q, topic, payload, src, nil)
}

// PublishDone is PublishWithin for a publisher that answers its client
// only once a write has reached the device: when it returns nil, done is
// called once with the outcome. A value (a topic no Writer claims, or the
// owner's own publish) is done when published, so done runs before
// PublishDone returns; a write to a claimed topic is done when its Writer
// says (any goroutine, maybe later: see Writer), nil when the device took
// it, else an error wrapping ErrWriteFailed. When PublishDone returns an
// error, done is never called. done must not block; nil asks for no
// outcome (PublishWithin).
func (b *Bus) PublishDone(q *Quota, topic string, payload []byte, src string, done func(error)) error {
	return b.publishDone(nil, q, topic, false, payload, src, done)
}

// PublishBytes is PublishWithin for a topic still in the bytes it was
// parsed from, as a protocol reads it off the wire. A topic the cache
// holds already is published under the cache's own string, so the steady
// publishing of known topics costs no topic string; only a new topic is
// copied. The bus keeps neither topic nor payload: the caller may reuse
// them once PublishBytes returns, and must not change them before.
func (b *Bus) PublishBytes(q *Quota, topic, payload []byte, src string) error {
	// The string aliases topic for the length of the call: the lookups
	// take it as it is, and whatever outlives the call (a new cache entry,
	// a Writer's topic) gets a copy (borrowed).
	return b.publishDone(nil, q, unsafe.String(unsafe.SliceData(topic), len(topic)), true, payload, src, nil)
}

// PublishRoute is PublishBytes for a publisher that keeps a Route: when
// it publishes to the topic of its previous publish again, and no
// subscription changed since, the Route saves the lookups of the topic's
// subscribers and cache entry (route.go). r belongs to one publisher,
// which must not use it from two goroutines at once.
func (b *Bus) PublishRoute(r *Route, q *Quota, topic, payload []byte, src string) error {
	return b.publishDone(r, q, unsafe.String(unsafe.SliceData(topic), len(topic)), true, payload, src, nil)
}

// publishDone is PublishDone for a topic that may be borrowed: one that
// aliases the caller's bytes, which nothing may keep. r may be nil.
func (b *Bus) publishDone(r *Route, q *Quota, topic string, borrowed bool, payload []byte, src string, done func(error)) error {
	if err := validTopic(topic, b.opt.MaxTopicLen, MaxLevels); err != nil {
		b.rejected.Add(1)
		return err
	}
	if len(payload) > b.opt.MaxPayload {
		b.rejected.Add(1)
		return fmt.Errorf("%w: %d bytes, limit %d", ErrPayloadTooLarge, len(payload), b.opt.MaxPayload)
	}
	if c, ok := b.claimFor(topic); ok && c.owner != src {
		if borrowed {
			topic = strings.Clone(topic)
		}
		return c.w.Write(topic, payload, src, done)
	}
	if err := b.publish(r, q, topic, borrowed, payload, src); err != nil {
		return err
	}
	if done != nil {
		done(nil)
	}
	return nil
}

// publish records and fans out a validated message that is a value. A
// borrowed topic is replaced by the cache's string as the message is
// stored, before anything can keep it. r, when not nil, is the
// publisher's Route: it may know the topic's hash, subscribers and cache
// entry, and it learns them for the next publish.
func (b *Bus) publish(r *Route, q *Quota, topic string, borrowed bool, payload []byte, src string) error {
	m := &Message{Topic: topic, Src: src, TS: b.opt.Now()}
	if len(payload) > maxPooled { // never pooled: copied before the lock, however big
		m.Payload = bytes.Clone(payload)
	}
	known := r.knows(topic)
	var h uint64
	if known {
		h = r.h
	} else {
		h = b.hash(topic)
	}
	sh := b.shardOf(h)
	// Sequence and cache update happen under the trie read lock, so a
	// Subscribe (write lock) splits publishes cleanly into those it must
	// replay from the cache and those that will reach it live. The
	// subscribers are known first: a message that two or more share is
	// chained to its topic's previous one as it is stored (chain.go).
	rl := b.trie.reader(h)
	rl.RLock()
	var c *collector
	single, multi, current := r.subscribers(known, b.trie.gen)
	if !current {
		c = collectorPool.Get().(*collector)
		b.root.collect(topic, c)
		c.dedupe()
		single, multi = c.single, c.multi
	}
	n := len(single) + len(multi)
	if m.Payload == nil {
		m.Payload, m.buf = copyPayload(payload, single, multi)
	}
	var chained *Message
	if n > 1 {
		chained = share(m)
	}
	var hint *entry
	if known {
		hint = r.e
	}
	e, err := b.store(sh, m, chained, q, borrowed, hint)
	if err == nil && r != nil {
		r.learn(m.Topic, e, h, known, c, b.trie.gen)
	}
	rl.RUnlock()
	if err == nil {
		switch n {
		case 0:
		case 1:
			b.fanOut(sh, alone(m), single, multi)
		default:
			b.fanOut(sh, chained, single, multi)
		}
	}
	if err != nil {
		m.buf.drop(2) // neither cached nor queued: the holds taken for both go unused
	}
	if c != nil {
		c.reset()
		collectorPool.Put(c)
	}
	return err
}

// copyPayload is the bus's copy of a publish's payload of at most
// maxPooled bytes: in a pooled buffer held by the cache and the queue
// when its one subscriber recycles (payload.go), else in an array of its
// own. It runs under the trie's read lock, which knows the subscribers.
func copyPayload(payload []byte, single, multi []*Subscriber) ([]byte, *payloadBuf) {
	if len(payload) == 0 {
		return nil, nil
	}
	var lone *Subscriber
	switch {
	case len(single) == 1 && len(multi) == 0:
		lone = single[0]
	case len(single) == 0 && len(multi) == 1:
		lone = multi[0]
	}
	if lone != nil && lone.recycles {
		buf := newPayload(payload, 2)
		return buf.b, buf
	}
	return bytes.Clone(payload), nil
}

// hash is a topic's hash, which picks its shard and its trie stripe.
func (b *Bus) hash(topic string) uint64 { return maphash.String(b.seed, topic) }

// shardOf is the shard of the topics of hash h.
func (b *Bus) shardOf(h uint64) *shard { return &b.shards[h&(shardCount-1)] }

// shardFor is the shard of topic.
func (b *Bus) shardFor(topic string) *shard { return b.shardOf(b.hash(topic)) }

// fanOut queues m, published to a topic of sh, to the collected
// subscribers (deduplicated: those with one filter, then those with
// several), outside the trie lock so notify callbacks and disconnects may
// take it; sh counts them. Every queue holds the same m: fan-out memory
// grows with the messages in flight, not with messages times subscribers.
func (b *Bus) fanOut(sh *shard, m *Message, single, multi []*Subscriber) {
	var t tally
	for _, s := range single {
		t.settle(b, s, m)
	}
	for _, s := range multi {
		t.settle(b, s, m)
	}
	t.flush(sh)
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
	if r != pushWoke && r != pushQueued {
		m.buf.unref() // the hold taken for the queue, which did not take m
	}
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

func (t *tally) flush(sh *shard) {
	if t.delivered > 0 {
		sh.delivered.Add(t.delivered)
	}
	if t.dropped > 0 {
		sh.dropped.Add(t.dropped)
	}
}

// Stats returns a snapshot of the counters.
func (b *Bus) Stats() Stats {
	var published, dropped uint64
	delivered := b.replayed.Load()
	for i := range b.shards {
		published += b.shards[i].seq.Load() // each accepted publish takes its shard's next number (store)
		delivered += b.shards[i].delivered.Load()
		dropped += b.shards[i].dropped.Load()
	}
	return Stats{
		Published:    published,
		Rejected:     b.rejected.Load(),
		CacheFull:    b.cacheFull.Load(),
		OverQuota:    b.overQuota.Load(),
		Delivered:    delivered,
		Dropped:      dropped,
		Disconnected: b.disconnected.Load(),
		Subscribers:  int(b.subscribers.Load()),
		Topics:       int(b.topics.Load()),
		Reserved:     int(b.reservedN.Load()),
	}
}

// Subscribed reports whether a subscriber's filter matches topic at this
// moment, for a publisher whose messages cost something to make and are
// worth it only to whoever listens (the gateway's stats snapshot). The
// answer may be stale as soon as it is given: a Subscribe just after it
// sees the next publish, or the cached value.
func (b *Bus) Subscribed(topic string) bool {
	rl := b.trie.reader(b.hash(topic))
	rl.RLock()
	c := collectorPool.Get().(*collector)
	b.root.collect(topic, c)
	n := c.len()
	rl.RUnlock()
	c.reset()
	collectorPool.Put(c)
	return n > 0
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

func (c *collector) len() int { return len(c.single) + len(c.multi) }

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
