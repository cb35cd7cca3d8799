package bus

import "weak"

// Chains and runs: a burst to one topic costs each subscriber one queue
// entry, not one per message.
//
// A publish to one topic reaches every subscriber of it, and a burst of
// them is queued whole before the subscribers' owners drain it. With an
// entry (a pointer) per message per subscriber, 200 publishes to 10,000
// WebSocket subscribers queued 2 million entries: 16 MB, plus the rings'
// growth from 2 to 256 slots, most of that fan-out's peak memory. So the
// shared messages of a topic are chained in publish order (each points to
// the next), and a queue entry is a run (ring.go): the first and last of
// consecutive messages of one chain. A message that comes right after the
// last run of a subscriber's queue extends that run instead of taking an
// entry.
//
// A chain ends when its messages count chainBytes against QueueBytes,
// and the topic's next message begins a new one. That bounds what a run
// pins beyond its own messages: the rest of its chain, newer messages the
// subscriber did not take (it dropped them, or unsubscribed), at most
// chainBytes per run whatever the drop policy and the subscriber do. The
// cache keeps the topic's last chained message behind a weak pointer, so
// a chain itself pins nothing: a message goes when no queue, and no run
// before it in its chain, refers to it. Only shared messages (two
// subscribers or more) are chained; a lone subscriber's queue takes an
// entry per message, a run of one, and its publish allocates nothing more.

// chainBytes bounds a chain, in what its messages count against
// QueueBytes (topic, payload and msgOverhead each): about a hundred small
// messages a chain.
const chainBytes = 16 << 10

// link appends m, a shared message just stored as e's value, to the
// topic's chain, or begins a new chain with it. The shard lock is held,
// so a chain follows the topic's sequence.
func (e *entry) link(m *Message) {
	size := m.size()
	if prev := e.tail.Value(); prev != nil && prev.ext.chain+size <= chainBytes {
		m.ext.chain = prev.ext.chain + size
		prev.ext.next.Store(m)
	} else {
		m.ext.chain = size
	}
	e.tail = weak.Make(m)
}
