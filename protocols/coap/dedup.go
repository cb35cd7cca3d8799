package coap

import (
	"net/netip"
	"time"
)

// The response cache (RFC 7252 section 4.5): a request that comes again
// with the same Message ID from the same endpoint within
// EXCHANGE_LIFETIME is a duplicate, answered with the bytes of the first
// answer and not executed again (a PUT publishes once). One cache per
// worker, a ring of coap.response_cache entries in arrival order, so it
// is bounded in entries (and in bytes: each holds one datagram) and the
// oldest, which expires first, goes first.

// dedupKey names an exchange: the peer and its Message ID.
type dedupKey struct {
	peer netip.AddrPort
	mid  uint16
}

type dedupEntry struct {
	key     dedupKey
	expires time.Time
	resp    []byte // the answer sent, reused by the entry that takes the slot next
}

type dedupCache struct {
	max      int
	lifetime time.Duration
	index    map[dedupKey]int // position in ring
	ring     []dedupEntry     // made full size on first use
	head, n  int
}

func newDedupCache(max int, lifetime time.Duration) dedupCache {
	return dedupCache{max: max, lifetime: lifetime, index: map[dedupKey]int{}}
}

// get returns the answer cached for k.
func (c *dedupCache) get(k dedupKey, now time.Time) ([]byte, bool) {
	i, ok := c.index[k]
	if !ok || !now.Before(c.ring[i].expires) {
		return nil, false
	}
	return c.ring[i].resp, true
}

// put caches resp (copied) as the answer for k, forgetting the oldest
// answer when the cache is full.
func (c *dedupCache) put(k dedupKey, resp []byte, now time.Time) {
	if c.ring == nil {
		c.ring = make([]dedupEntry, c.max)
	}
	if i, ok := c.index[k]; ok { // the same ID again, after its entry expired
		c.ring[i].resp = append(c.ring[i].resp[:0], resp...)
		c.ring[i].expires = now.Add(c.lifetime)
		return
	}
	if c.n == c.max {
		c.pop()
	}
	i := (c.head + c.n) % c.max
	e := &c.ring[i]
	e.key, e.expires, e.resp = k, now.Add(c.lifetime), append(e.resp[:0], resp...)
	c.index[k] = i
	c.n++
}

// pop forgets the oldest entry.
func (c *dedupCache) pop() {
	e := &c.ring[c.head]
	if c.index[e.key] == c.head {
		delete(c.index, e.key)
	}
	c.head = (c.head + 1) % c.max
	c.n--
}

// expire forgets the entries past their lifetime.
func (c *dedupCache) expire(now time.Time) {
	for c.n > 0 && !now.Before(c.ring[c.head].expires) {
		c.pop()
	}
}

// len is how many answers are cached.
func (c *dedupCache) len() int { return c.n }
