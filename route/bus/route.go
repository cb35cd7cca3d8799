package bus

// A Route is a publisher's memory of its previous publish: the topic's
// hash and cache entry, and, from the second publish to it on, the
// subscribers it reached. Devices publish to the same few topics again
// and again; a publisher that keeps a Route (Bus.PublishRoute) publishes
// to the topic it used last without looking up its subscribers or its
// cache entry. In a CPU profile of the live echo of
// examples/bench/echocompare (1,000 connections on 1,000 topics) those
// two map lookups were about a third of the bus's samples.
//
// What a Route knows stays true this way:
//   - Its subscribers are used only while the trie lock's generation is
//     the one they were collected at. Every writer of the trie (a
//     subscription made or removed, a subscriber leaving) moves the
//     generation, and a publish reads it under the trie read lock, as
//     it would collect.
//   - Its entry is used only while it is in the cache (entry.dead is
//     read under the shard lock, where store looks it up).
//   - It is filled under the trie read lock of the publish that found
//     what it keeps, and used by its one publisher only.
//
// The subscribers are remembered from the second publish to a topic on,
// and only up to maxRouteSubs of them: a publisher that alternates
// between topics never copies a list, and a fan-out's list is long enough
// that the lookup saved is small beside the deliveries.
//
// The zero Route is ready to use; it keeps pointers to the cache entry
// and the subscribers until its next publish (a closed subscriber has
// dropped its queue, so what it pins is small).
type Route struct {
	topic  string // the topic, as the cache's string; "" before the first publish
	h      uint64 // its hash
	e      *entry // its cache entry
	subsAt uint64 // 1 + the trie generation single and multi were collected at; 0: none
	single []*Subscriber
	multi  []*Subscriber
}

// maxRouteSubs is how many subscribers a Route remembers at most.
const maxRouteSubs = 64

// knows reports whether r went to topic last time; r may be nil.
func (r *Route) knows(topic string) bool {
	return r != nil && r.e != nil && r.topic == topic
}

// subscribers returns the remembered subscribers and true when r knows
// the topic (knows) and they were collected at trie generation gen.
func (r *Route) subscribers(known bool, gen uint64) (single, multi []*Subscriber, current bool) {
	if !known || r.subsAt != gen+1 {
		return nil, nil, false
	}
	return r.single, r.multi, true
}

// learn records what a publish found: the topic (the cache's string, as
// store put it in the message), its entry e and hash h, and, when the
// topic was known already and c collected its subscribers afresh at trie
// generation gen, those. It runs under the trie read lock.
func (r *Route) learn(topic string, e *entry, h uint64, known bool, c *collector, gen uint64) {
	r.e, r.h = e, h
	if !known {
		r.topic = topic
		r.forget()
		return
	}
	if c == nil {
		return // the remembered subscribers were current
	}
	if c.len() > maxRouteSubs {
		r.forget()
		return
	}
	r.forget()
	r.single = append(r.single, c.single...)
	r.multi = append(r.multi, c.multi...)
	r.subsAt = gen + 1
}

// forget lets go of the remembered subscribers.
func (r *Route) forget() {
	clear(r.single)
	clear(r.multi)
	r.single, r.multi, r.subsAt = r.single[:0], r.multi[:0], 0
}
