package bus

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"golang.org/x/sys/cpu"
)

// The last-value cache (LVC): one entry per topic, sharded by topic hash.
//
// It is bounded by Options.MaxTopics. A publish that would add a topic
// past the bound is refused (ErrCacheFull) rather than published without
// its value being kept: a value that a reader cannot Get afterwards is a
// lost value. Topics that something is configured to serve (a Modbus
// register map, say) are reserved with Reserve: they are not counted
// against MaxTopics and always keep their value, however full the cache.
// One publisher (a connection) may add at most Options.TopicQuota new
// topics through its Quota, so no single device can fill the cache.
//
// Each shard also keeps its entries in the order they were made, each
// with its birth number, so a retained replay can walk a shard a piece at
// a time and resume where it stopped however the map changes meanwhile
// (replay.go).

// entry is one cached topic.
type entry struct {
	msg  Message
	tail weak.Pointer[Message] // the topic's last chained message (chain.go)
	born uint64                // birth number in its shard: its place in shard.order
	pins uint32                // owners that reserve the topic (Reserve)
	has  bool                  // msg holds a value; a reserved topic may have none yet
	dead bool                  // removed from the map, still in order until compacted
}

// shard is one slice of the LVC, followed by a cache line of padding so
// that two shards never share a line, wherever the Bus lands: Go aligns
// no allocation to a cache line (a large object with pointers starts a
// word past its slot, after the allocator's type header), so only a full
// line between them keeps them apart.
type shard struct {
	shardData
	_ cpu.CacheLinePad
}

type shardData struct {
	mu    sync.RWMutex
	m     map[string]*entry
	order []*entry // by birth number; dead entries until compact
	born  uint64   // the next birth number
	dead  int      // dead entries in order

	// The publish sequence of this shard's topics (written under mu) and
	// the deliveries of their publishes: kept here, they share the cache
	// lines a publish's store writes anyway, not a line that publishes on
	// every core write (Bus).
	seq                atomic.Uint64
	delivered, dropped atomic.Uint64
}

// add makes the entry of a new topic; sh.mu is held for writing.
func (sh *shard) add(topic string) *entry {
	e := &entry{born: sh.born}
	e.msg.Topic = topic
	sh.born++
	sh.m[topic] = e
	sh.order = append(sh.order, e)
	return e
}

// remove deletes e from the map and compacts order once dead entries are
// most of it; sh.mu is held for writing. A replay in progress resumes by
// birth number, which compaction keeps, so it loses nothing.
func (sh *shard) remove(e *entry) {
	delete(sh.m, e.msg.Topic)
	e.msg.buf.unref()
	e.dead, e.has = true, false
	e.msg, e.tail = Message{}, weak.Pointer[Message]{}
	sh.dead++
	if sh.dead > 64 && 2*sh.dead > len(sh.order) {
		sh.order = slices.DeleteFunc(sh.order, func(e *entry) bool { return e.dead })
		sh.dead = 0
	}
}

// Quota counts the new topics one publisher, usually one connection, has
// added to the cache, against Options.TopicQuota. The zero Quota is ready
// to use. A Quota must not be used by two goroutines at once: a session
// keeps its own, in 4 bytes (it lives as long as the connection).
type Quota struct {
	added uint32
}

// Added is how many new topics the publisher has added.
func (q *Quota) Added() int { return int(q.added) }

// store assigns m its sequence number and makes it its topic's last
// value, or refuses it: ErrTopicQuota when the topic is new and q has
// added its quota, ErrCacheFull when it is new and the cache is full.
// Assigning the shard's sequence under its lock keeps each topic's cached
// value the one with the highest sequence. chained, if not nil, is m's
// shared copy: it takes the same sequence and joins the topic's chain.
// Both take the cache entry's topic string, so the messages of a topic
// share one, and a borrowed m.Topic (PublishBytes) is kept nowhere; the
// entry of a new topic copies it. It returns the topic's entry; hint, if
// not nil, is what a Route says that entry is.
func (b *Bus) store(sh *shard, m, chained *Message, q *Quota, borrowed bool, hint *entry) (*entry, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := hint // m's topic's entry, from a Route, unless it left the cache since
	if e == nil || e.dead {
		e = sh.m[m.Topic]
	}
	if e == nil {
		if q != nil && int(q.added) >= b.opt.TopicQuota {
			b.overQuota.Add(1)
			return nil, fmt.Errorf("%w: %d new topics, limit %d", ErrTopicQuota, q.added, b.opt.TopicQuota)
		}
		if !b.countTopic() {
			b.cacheFull.Add(1)
			return nil, fmt.Errorf("%w: %d topics", ErrCacheFull, b.opt.MaxTopics)
		}
		if q != nil {
			q.added++
		}
		topic := m.Topic
		if borrowed {
			topic = strings.Clone(topic)
		}
		e = sh.add(topic)
	}
	m.Topic = e.msg.Topic
	m.Seq = sh.seq.Add(1)
	old := e.msg.buf
	e.msg, e.has = *m, true
	old.unref()     // the newer value takes the cache's hold
	e.msg.ext = nil // the cache keeps no encodings (encoding.go)
	if chained != nil {
		chained.Topic, chained.Seq = m.Topic, m.Seq
		e.link(chained)
	}
	return e, nil
}

// countTopic counts a new cached topic unless MaxTopics is reached.
func (b *Bus) countTopic() bool {
	if b.topics.Add(1) <= int64(b.opt.MaxTopics) {
		return true
	}
	b.topics.Add(-1)
	return false
}

// Get returns the last value published on topic.
func (b *Bus) Get(topic string) (Message, bool) {
	sh := b.shardFor(topic)
	sh.mu.RLock()
	e := sh.m[topic]
	var m Message
	ok := e != nil && e.has
	if ok {
		m = escape(e.msg)
	}
	sh.mu.RUnlock()
	return m, ok
}

// cachedBy reports whether topic has a value with a sequence up to upTo.
func (b *Bus) cachedBy(topic string, upTo uint64) bool {
	m, ok := b.Get(topic)
	return ok && m.Seq <= upTo
}

// Forget removes topic's value from the LVC, freeing its place under
// MaxTopics (a reserved topic stays reserved, without a value). It
// reports whether the topic had a value.
func (b *Bus) Forget(topic string) bool {
	sh := b.shardFor(topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[topic]
	if e == nil || !e.has {
		return false
	}
	if e.pins > 0 {
		e.msg.buf.unref()
		e.msg, e.has = Message{Topic: e.msg.Topic}, false // the entry's own string
		return true
	}
	sh.remove(e)
	b.topics.Add(-1)
	return true
}

// Reserve makes topics the ones owner reserves, in place of those it
// reserved before (an empty list releases them all). A reserved topic
// always keeps its last value: it does not count against MaxTopics and a
// publish to it is never refused for a full cache or a spent quota. The
// gateway reserves what its configuration serves (the Modbus register
// map, the stats topic), and again on reload. A topic no owner reserves
// any more keeps its value as an ordinary topic, counted from then on
// (which may leave the cache over MaxTopics until topics are forgotten).
// An invalid topic fails the call and changes nothing.
func (b *Bus) Reserve(owner string, topics []string) error {
	for _, t := range topics {
		if err := validTopic(t, b.opt.MaxTopicLen, MaxLevels); err != nil {
			return fmt.Errorf("bus: reserve for %s: %w", owner, err)
		}
	}
	next := slices.Compact(slices.Sorted(slices.Values(topics)))
	b.resMu.Lock()
	defer b.resMu.Unlock()
	prev := b.reserved[owner]
	for _, t := range next {
		if _, found := slices.BinarySearch(prev, t); !found {
			b.pin(t)
		}
	}
	for _, t := range prev {
		if _, found := slices.BinarySearch(next, t); !found {
			b.unpin(t)
		}
	}
	if len(next) == 0 {
		delete(b.reserved, owner)
	} else {
		b.reserved[owner] = next
	}
	return nil
}

// pin adds one reservation of topic.
func (b *Bus) pin(topic string) {
	sh := b.shardFor(topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[topic]
	switch {
	case e == nil:
		e = sh.add(topic)
	case e.pins == 0 && e.has:
		b.topics.Add(-1) // reserved topics are not counted
	}
	if e.pins++; e.pins == 1 {
		b.reservedN.Add(1)
	}
}

// unpin removes one reservation of topic.
func (b *Bus) unpin(topic string) {
	sh := b.shardFor(topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[topic]
	if e == nil || e.pins == 0 {
		return
	}
	if e.pins--; e.pins > 0 {
		return
	}
	b.reservedN.Add(-1)
	if e.has {
		b.topics.Add(1)
	} else {
		sh.remove(e)
	}
}

// Reserved reports whether some owner reserves topic.
func (b *Bus) Reserved(topic string) bool {
	sh := b.shardFor(topic)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	e := sh.m[topic]
	return e != nil && e.pins > 0
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
		for _, e := range sh.order {
			if e.has && matchValid(filter, e.msg.Topic) {
				batch = append(batch, escape(e.msg))
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
