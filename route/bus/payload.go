package bus

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Recycled payloads: a publish that reaches one subscriber, whose owner
// hands its deliveries back (Subscriber.Recycle), copies its payload into
// a pooled buffer instead of a new array, and the buffer goes back to its
// pool when the last of its two holders lets it go: the cache, when the
// topic has a newer value, and the owner, when it Releases the delivery.
// A device's steady stream to a topic it alone reads (its own echo, a
// dashboard's one reader) then allocates no payload per publish, and the
// collector, which ran about nine times a second for a 1 KiB echo at
// 65,000 requests/s, has that much less to collect.
//
// The count is safe only while nothing else holds the array. So every
// way a cached value leaves the bus (Get, a retained replay, Retained)
// pins the buffer first, under the shard lock that keeps the cache's
// hold: a pinned buffer is never recycled, and the garbage collector
// takes it as it takes any other payload. A hold that is dropped without
// being counted down (a closed subscriber's queue) only loses the
// buffer to the collector, never hands it out twice: a missed count
// costs an allocation, an extra one would cost a value.
//
// Shared messages (two subscribers or more) keep their collected arrays:
// they are one per publish however many subscribers there are, and their
// frames are shared too (encoding.go).

// payloadBuf is a pooled payload array and its holds.
type payloadBuf struct {
	b    []byte       // the payload; cap is its pool's size class
	refs atomic.Int32 // holds; pinnedRefs set: never recycled
}

// pinnedRefs marks a buffer that left the bus's sight: its count never
// reaches zero again.
const pinnedRefs = 1 << 30

// Pooled sizes: powers of two from minPooled to maxPooled bytes. A
// payload above maxPooled gets an array of its own: big values are rare
// and a pool of them would pin what one burst left.
const (
	minPooledShift = 6  // 64 bytes
	maxPooledShift = 14 // 16 KiB
	maxPooled      = 1 << maxPooledShift
)

var payloadPools [maxPooledShift - minPooledShift + 1]sync.Pool

// payloadPool is the pool of the smallest class that holds n bytes.
func payloadPool(n int) (*sync.Pool, int) {
	shift := max(bits.Len(uint(n-1)), minPooledShift)
	return &payloadPools[shift-minPooledShift], 1 << shift
}

// newPayload copies p (1 to maxPooled bytes) into a pooled buffer held
// refs times.
func newPayload(p []byte, refs int32) *payloadBuf {
	pool, size := payloadPool(len(p))
	buf, _ := pool.Get().(*payloadBuf)
	if buf == nil {
		buf = &payloadBuf{b: make([]byte, size)}
	}
	buf.b = append(buf.b[:0], p...)
	buf.refs.Store(refs)
	return buf
}

// unref drops one hold, recycling the buffer with the last. A nil buffer
// (a payload the collector owns) has nothing to drop.
func (p *payloadBuf) unref() { p.drop(1) }

// drop drops n holds; nil-safe.
func (p *payloadBuf) drop(n int32) {
	if p != nil && p.refs.Add(-n) == 0 {
		pool, _ := payloadPool(cap(p.b))
		p.b = p.b[:0]
		pool.Put(p)
	}
}

// pin keeps the buffer out of the pools for good, for a payload handed to
// a reader the count does not follow; nil-safe.
func (p *payloadBuf) pin() {
	if p != nil {
		p.refs.Or(pinnedRefs)
	}
}

// escape returns m as it may leave the bus's sight (a cached value read
// by Get or a replay): its buffer pinned and no buffer named, so nobody
// outside counts it down. The shard lock that guards the cache's hold on
// the buffer is held.
func escape(m Message) Message {
	m.buf.pin()
	m.buf = nil
	return m
}

// Recycle declares that the owner hands every message it drains back
// with Release once it no longer reads its payload (nor anything sliced
// from it). A publish that reaches this subscriber alone then copies its
// payload into a pooled buffer (payload.go). A publish decides under the
// trie lock, which Recycle takes, so every publish after it sees it;
// call it before the first Subscribe, so that every delivery does.
func (s *Subscriber) Recycle() {
	s.bus.trie.Lock()
	s.recycles = true
	s.bus.trie.Unlock()
}

// Release hands back drained messages: the owner reads none of their
// payloads after it. It forgets their buffers as it goes, so releasing a
// message twice, or one that has none, does nothing.
func (s *Subscriber) Release(msgs []Message) {
	for i := range msgs {
		if m := &msgs[i]; m.buf != nil {
			m.buf.unref()
			m.buf, m.Payload = nil, nil // a read after Release finds nothing, not another value
		}
	}
}
