package bus

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Encodings: encode once, deliver many. A published message reaches every
// subscriber of its topic, and the subscribers of one protocol send it in
// the same bytes (a private PUB frame with its CRC, a WebSocket JSON
// text). The first of them to deliver the message encodes it and stores
// the bytes on the message (SetEncoded); the others find them (Encoded)
// and copy them into their output instead of encoding again.
//
// The bytes are immutable once stored and owned by the garbage collector,
// not by a pool: a queue, a cache entry or an output buffer that still
// refers to them keeps them alive, so none can be reused while anyone
// may still write them. They go when the message does: when the last
// subscriber has drained it and the cache holds a newer value.
//
// The last-value cache keeps its values without encodings, so that it
// does not hold a frame per topic per protocol for as long as a topic
// lives: a retained replay (a value read from the cache, marked Retained)
// is encoded per delivery, as it always was.

// Encoding names one way of encoding messages, registered once per
// protocol encoding by NewEncoding.
type Encoding uint8

// MaxEncodings is how many encodings NewEncoding registers at most: every
// published message carries a slot of 8 bytes for each.
const MaxEncodings = 4

var encodingRegistry struct {
	sync.Mutex
	names []string
}

// NewEncoding registers an encoding under a name unique to the process,
// for a protocol package's init. It panics past MaxEncodings or on a name
// used already: both are programming errors.
func NewEncoding(name string) Encoding {
	r := &encodingRegistry
	r.Lock()
	defer r.Unlock()
	for _, n := range r.names {
		if n == name {
			panic(fmt.Sprintf("bus: encoding %q registered twice", name))
		}
	}
	if len(r.names) == MaxEncodings {
		panic(fmt.Sprintf("bus: encoding %q past MaxEncodings (%d)", name, MaxEncodings))
	}
	r.names = append(r.names, name)
	return Encoding(len(r.names) - 1)
}

// encodings are one message's stored encodings, by Encoding.
type encodings [MaxEncodings]atomic.Pointer[[]byte]

// shared is a published message and what its subscribers share of it, in
// one allocation.
type shared struct {
	Message
	ext sharedExt
}

// sharedExt is what only a message shared by the subscribers of a publish
// carries: its encodings and its place in its topic's chain (chain.go).
type sharedExt struct {
	enc   encodings
	next  atomic.Pointer[Message] // the topic's next message in the chain, nil at its end
	chain int                     // what the chain counts up to this message, guarded by the shard lock
}

// share returns a copy of m with encoding slots and a chain link, for the
// subscribers of a publish to share. Only a publish that reaches two or
// more pays for it.
func share(m *Message) *Message {
	s := &shared{Message: *m}
	s.Message.ext = &s.ext
	return &s.Message
}

// alone returns a copy of m without encoding slots, for a publish that
// reaches one subscriber: there is nobody to lend its encoding to, so the
// subscriber encodes it straight into its own output (Shared is false)
// instead of into an exact-size array of its own, stored on the message
// behind a pointer of its own: two allocations per delivery, a frame's
// size, for nothing (a 1 KiB echo: 1.1 KiB per request).
//
// The copy comes from loneMsgs and goes back there when the queue lets it
// go (release): only that subscriber's queue ever refers to it.
func alone(m *Message) *Message {
	one := loneMsgs.Get().(*Message)
	*one = *m
	return one
}

// loneMsgs recycles the messages of publishes that reached one subscriber.
// Such a message is referred to by that subscriber's queue and nothing
// else (no chain, no cache: the cache keeps a copy), so once the queue
// lets it go, Drain having copied it out or the drop policy evicted it,
// it is free. Recycled, a steady stream to lone subscribers (a device's
// own echo, a topic with one reader) allocates no message per publish,
// and the collector has that much less to chase: 96 bytes a publish
// were most of what a 64 B echo allocated.
var loneMsgs = sync.Pool{New: func() any { return new(Message) }}

// release recycles m, which the queue just let go, if it was alone (no
// encodings: a queue holds only published messages, alone or shared). It
// is cleared first, so the pool pins no topic or payload.
func release(m *Message) {
	if m.ext == nil {
		*m = Message{}
		loneMsgs.Put(m)
	}
}

// slot is where m's encoding e lives, nil for a message with none: built
// by hand (as tests do) or replayed from the cache.
func (m *Message) slot(e Encoding) *atomic.Pointer[[]byte] {
	if m.ext == nil || m.Retained || int(e) >= MaxEncodings {
		return nil
	}
	return &m.ext.enc[e]
}

// Shared reports whether m has encoding slots, which SetEncoded fills for
// the other subscribers: a live message published through the bus.
func (m *Message) Shared() bool { return m.ext != nil && !m.Retained }

// Encoded returns the bytes stored for m under e, nil if none are. They
// are shared: nobody may modify them.
func (m *Message) Encoded(e Encoding) []byte {
	if p := m.slot(e); p != nil {
		if b := p.Load(); b != nil {
			return *b
		}
	}
	return nil
}

// SetEncoded stores b as m's encoding e and returns the bytes that the
// subscribers share from now on: b, or what another subscriber stored
// first (encoding on two workers at once, both encode; one copy wins).
// The caller must not modify b afterwards, nor reuse its array. A message
// with no encodings (see slot) stores nothing and returns b.
func (m *Message) SetEncoded(e Encoding, b []byte) []byte {
	p := m.slot(e)
	if p == nil {
		return b
	}
	if p.CompareAndSwap(nil, &b) {
		return b
	}
	return *p.Load()
}
