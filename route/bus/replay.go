package bus

import (
	"cmp"
	"math"
	"slices"
)

// Retained replays are read from the cache when the subscriber drains,
// not queued when it subscribes. A filter such as "#" over 100,000 cached
// topics would otherwise make Subscribe do all that work at once, on the
// caller's goroutine (a worker serving other connections), and queue more
// than any queue holds. Instead each Drain reads a bounded part of the
// cache (at most replayScan entries, and the caller's byte budget), and
// the replay resumes where it stopped at the next Drain, which the
// owner calls when its peer has taken the last batch.
//
// A replay is a filter, the last sequence number it replays in each shard
// (the shard's sequence when the filter went into the trie: every later
// publish reaches the subscriber live) and a cursor: a shard and a birth
// number in that shard's order. An entry whose value is newer than its
// bound is skipped: that value reaches the subscriber live, so the older
// one must not follow it.

// replayScan bounds the cache entries one Drain reads for replays,
// matching or not: a filter that matches few of many topics costs
// bounded work per call too.
const replayScan = 4096

// replay is a retained replay in progress.
type replay struct {
	filter string
	upTo   replayBound // replay values with a sequence up to this
	shard  int         // the shard to read next
	born   uint64      // the first birth number not read yet in that shard
}

// replayBound is where a replay stops. An exact filter's topic lives in
// one shard, so it needs that shard's number; a wildcard filter's topics
// may be in any, so it keeps one per shard (512 bytes, while the replay
// runs).
type replayBound struct {
	one    uint64              // an exact filter's
	shards *[shardCount]uint64 // a wildcard filter's, by shard
}

// replayBound reads the bound of a filter going into the trie now; the
// trie is held for writing, so no publish is between its store and its
// delivery.
func (b *Bus) replayBound(filter string) replayBound {
	if !hasWildcard(filter) {
		return replayBound{one: b.shardFor(filter).seq.Load()}
	}
	var all [shardCount]uint64
	for i := range b.shards {
		all[i] = b.shards[i].seq.Load()
	}
	return replayBound{shards: &all}
}

// in reports whether a value numbered seq in shard i is the replay's.
func (u replayBound) in(i int, seq uint64) bool {
	if u.shards != nil {
		return seq <= u.shards[i]
	}
	return seq <= u.one
}

// Batch is what one Drain took.
type Batch struct {
	Msgs    []Message // queued messages, oldest first, then retained values
	Dropped uint64    // messages lost to the drop policy since the previous Drain
	More    bool      // more is waiting: drain again when ready, no notify comes for it
}

// startReplay queues the replay of filter's retained values up to upTo,
// and wakes the owner if it had nothing to do.
func (s *Subscriber) startReplay(filter string, upTo replayBound) {
	s.mu.Lock()
	if s.closed || s.cut.Load() {
		s.mu.Unlock()
		return
	}
	s.replays = append(s.replays, &replay{filter: filter, upTo: upTo})
	wake := s.n == 0 && len(s.replays) == 1
	s.mu.Unlock()
	if wake {
		s.wake()
	}
}

// stopReplay forgets the replay of filter, if one is under way.
func (s *Subscriber) stopReplay(filter string) {
	s.mu.Lock()
	s.replays = slices.DeleteFunc(s.replays, func(r *replay) bool { return r.filter == filter })
	s.mu.Unlock()
}

// Drain appends to dst the queued messages, oldest first, and then the
// retained values of the replays under way, until what it took counts
// maxBytes (Message sizes as the queue counts them; at least one message
// if any is waiting). maxBytes <= 0 takes everything, the replays to
// their end: for tests and tools, not for servers. Batch.Dropped is what
// the drop policy cost since the previous Drain, for the owner to tell its
// peer; Batch.More says something is left, which the owner must drain
// later (no notify comes for it). It never blocks on publishers.
func (s *Subscriber) Drain(dst []Message, maxBytes int) Batch {
	scanLimit := replayScan
	if maxBytes <= 0 {
		maxBytes, scanLimit = math.MaxInt, math.MaxInt
	}
	s.mu.Lock()
	if len(s.replays) == 0 {
		// The queue alone, under its lock: no replay cursor to keep from
		// another Drain (drainMu). What is left is known already: a
		// message queued or a replay begun from here on finds nothing
		// pending and wakes the owner.
		var lost uint64
		dst, _, lost = s.takeQueued(dst, maxBytes)
		more := s.n > 0
		s.mu.Unlock()
		return Batch{Msgs: dst, Dropped: lost, More: more}
	}
	s.mu.Unlock()
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	s.mu.Lock()
	dst, used, lost := s.takeQueued(dst, maxBytes)
	more := s.n > 0 || len(s.replays) > 0
	replaying := len(s.replays) > 0 && used < maxBytes
	s.mu.Unlock()
	if replaying {
		queued := len(dst)
		dst = s.replayInto(dst, used, maxBytes, scanLimit)
		s.bus.replayed.Add(uint64(len(dst) - queued))
		s.mu.Lock()
		more = s.n > 0 || len(s.replays) > 0
		s.mu.Unlock()
	}
	return Batch{Msgs: dst, Dropped: lost, More: more}
}

// takeQueued appends queued messages to dst, oldest first, until they
// count maxBytes (at least one, if any is queued), and returns what they
// count and the messages lost since the last Drain; s.mu is held.
func (s *Subscriber) takeQueued(dst []Message, maxBytes int) ([]Message, int, uint64) {
	used := 0
	for s.n > 0 && used < maxBytes {
		size := s.ring[s.head].first.size()
		if used > 0 && used+size > maxBytes {
			break
		}
		m := s.takeOldest()
		dst = append(dst, *m)
		release(m)
		used += size
	}
	if s.n == 0 && s.ring != nil {
		s.releaseRing()
	}
	lost := s.lost
	s.lost = 0
	return dst, used, lost
}

// replayInto continues the replays, oldest first, within the budgets.
// The cursor is copied out and written back under s.mu, so Unsubscribe or
// Close may drop a replay meanwhile.
func (s *Subscriber) replayInto(dst []Message, used, maxBytes, scanLimit int) []Message {
	scanned := 0
	for used < maxBytes && scanned < scanLimit {
		s.mu.Lock()
		if len(s.replays) == 0 || s.closed || s.cut.Load() {
			s.mu.Unlock()
			break
		}
		r := s.replays[0]
		cur := *r
		s.mu.Unlock()
		var done bool
		dst, used, done = s.bus.replayStep(&cur, dst, used, maxBytes, &scanned, scanLimit)
		s.mu.Lock()
		if len(s.replays) > 0 && s.replays[0] == r {
			if done {
				s.replays[0] = nil
				s.replays = s.replays[1:]
				if len(s.replays) == 0 {
					s.replays = nil // an idle subscriber keeps no array
				}
			} else {
				*r = cur
			}
		}
		s.mu.Unlock()
	}
	return dst
}

// replayStep reads cached values for r from its cursor on, appending
// those it replays, until the budgets run out or the replay ends (done).
// Each shard is read under its read lock, so no publish to it slips
// between reading a value and deciding about it.
func (b *Bus) replayStep(r *replay, dst []Message, used, maxBytes int, scanned *int, scanLimit int) ([]Message, int, bool) {
	if !hasWildcard(r.filter) {
		sh := b.shardFor(r.filter)
		sh.mu.RLock()
		if e := sh.m[r.filter]; e != nil && e.has && e.msg.Seq <= r.upTo.one {
			dst, used = appendRetained(dst, used, &e.msg)
		}
		sh.mu.RUnlock()
		*scanned++
		return dst, used, true
	}
	for ; r.shard < shardCount; r.shard, r.born = r.shard+1, 0 {
		sh := &b.shards[r.shard]
		sh.mu.RLock()
		i, _ := slices.BinarySearchFunc(sh.order, r.born, func(e *entry, born uint64) int { return cmp.Compare(e.born, born) })
		for ; i < len(sh.order); i++ {
			if used >= maxBytes || *scanned >= scanLimit {
				sh.mu.RUnlock()
				return dst, used, false
			}
			e := sh.order[i]
			*scanned++
			r.born = e.born + 1
			if e.has && r.upTo.in(r.shard, e.msg.Seq) && matchValid(r.filter, e.msg.Topic) {
				dst, used = appendRetained(dst, used, &e.msg)
			}
		}
		sh.mu.RUnlock()
	}
	return dst, used, true
}

func appendRetained(dst []Message, used int, m *Message) ([]Message, int) {
	c := escape(*m)
	c.Retained = true
	return append(dst, c), used + c.size()
}
