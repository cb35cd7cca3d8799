package websocket

import (
	"bytes"
	"strconv"
	"sync"

	"golang.org/x/sys/cpu"

	"github.com/edgemux/edgemux/route/bus"
)

// Deliveries. A session takes messages from its bus subscriber only while
// the connection's output is empty (the socket takes what it is given),
// one bounded batch per round, staged and written in one piece. A burst,
// or the replay of "#" over the whole cache, therefore waits in the bus
// (a queue bounded in bytes; a replay read as it goes) instead of in the
// output buffer, where it would pass high_water and close the connection
// as a slow consumer; publishers never wait; and between batches the
// worker serves its other connections. When the socket is full the
// session waits for Writable; after deliverRounds rounds it yields with
// Conn.Notify.
//
// What the bus dropped anyway (a subscriber that does not read while its
// queue overflows) is told before the next delivery with
// {"op":"dropped","count":N}, and counted per connection
// (Conn.CountDropped) and in Stats.Dropped.

const (
	// deliverBatch is one round, in the bus's queue bytes (about what
	// the JSON takes: 80 bytes of queue slot per message stand for the
	// JSON's own keys).
	deliverBatch = flushAt
	// deliverRounds is how many rounds one call writes at most.
	deliverRounds = 8
)

// Notified delivers what the subscription has.
func (s *session) Notified() (err error) {
	if s.closing || s.sub == nil {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = s.panicked(r)
		}
		err = s.end(err)
	}()
	if s.operatorChanged() {
		return s.closeWith(ClosePolicy, "operator access changed", ErrOperatorChanged)
	}
	return s.deliver()
}

// Writable resumes deliveries that waited for the socket.
func (s *session) Writable() error {
	if !s.waiting {
		return nil
	}
	s.waiting = false
	return s.Notified()
}

// deliver stages and writes rounds of deliveries while the socket takes
// them.
func (s *session) deliver() error {
	scratch := s.h.deliveries.get()
	defer s.h.deliveries.put(scratch)
	msgs, js := &scratch.msgs, &scratch.js
	for round := 0; ; round++ {
		if s.sub.Disconnected() {
			return s.slowSubscriber()
		}
		if s.conn.Buffered() > 0 {
			s.waiting = true
			return nil
		}
		if round == deliverRounds {
			s.conn.Notify()
			return nil
		}
		// The previous round's messages are let go before this round's
		// overwrite fewer of them: put clears only the last round's.
		clear(*msgs)
		batch := s.sub.Drain((*msgs)[:0], deliverBatch)
		*msgs = batch.Msgs
		if batch.Dropped > 0 {
			*js = s.dropped((*js)[:0], batch.Dropped)
			if err := s.stage(*js, false); err != nil {
				return err
			}
		}
		for i := range batch.Msgs {
			m := &batch.Msgs[i]
			if !s.wanted(m) {
				continue
			}
			var text []byte
			text, *js = s.deliveryText(m, *js)
			if err := s.stage(text, true); err != nil {
				return err
			}
			if m.Shared() {
				s.l.staged(text)
			}
		}
		// Every payload is in a frame by now (the JSON copies it; stage
		// copies the JSON): the recycled ones may go back
		// (bus.Subscriber.Recycle).
		s.sub.Release(batch.Msgs)
		// The output was empty: this write goes ahead whatever its size.
		if err := s.flush(); err != nil {
			return err
		}
		if !batch.More {
			return nil
		}
	}
}

// deliverScratch is what one deliver call works in: the drained messages
// and the JSON scratch, from one pool (one Get and one Put per call; a
// fan-out makes a call per subscriber per publish).
type deliverScratch struct {
	msgs []bus.Message
	js   []byte
	_    cpu.CacheLinePad // written on every call: apart from the next one's
}

// deliverScratches pools deliverScratch; slices grown past the bounds
// are dropped on put, so one burst does not pin memory.
type deliverScratches struct{ pool sync.Pool }

func (d *deliverScratches) get() *deliverScratch {
	if s, ok := d.pool.Get().(*deliverScratch); ok {
		return s
	}
	return &deliverScratch{msgs: make([]bus.Message, 0, 16), js: make([]byte, 0, 512)}
}

func (d *deliverScratches) put(s *deliverScratch) {
	if cap(s.msgs) > 1024 || cap(s.js) > 2*flushAt {
		return
	}
	clear(s.msgs) // pin no message or topic
	s.msgs, s.js = s.msgs[:0], s.js[:0]
	d.pool.Put(s)
}

// deliveryJSON is the JSON text of a delivery, the same bytes for every
// subscriber (no subscription id in it): encoded once per message and
// copied by the others (bus.Message.Encoded). The WebSocket frame around
// it is not shared: per-message compression makes it differ per
// connection, and its header is 2 to 10 bytes.
var deliveryJSON = bus.NewEncoding("websocket.json")

// deliveryText returns m's JSON text and the scratch buffer (grown, if it
// was used). The text is the shared one when another subscriber encoded
// it; a message that cannot be shared is encoded into scratch.
func (s *session) deliveryText(m *bus.Message, scratch []byte) (text, _ []byte) {
	if text := m.Encoded(deliveryJSON); text != nil {
		return text, scratch
	}
	s.h.n.encoded.Add(s.stripe, 1)
	scratch = appendDelivery(scratch[:0], m)
	if !m.Shared() {
		return scratch, scratch
	}
	// An exact-size copy: the shared array is never appended to.
	return m.SetEncoded(deliveryJSON, bytes.Clone(scratch)), scratch
}

// dropped counts n lost deliveries and appends the notice that tells the
// client: {"op":"dropped","count":n}.
func (s *session) dropped(b []byte, n uint64) []byte {
	s.h.n.dropped.Add(n)
	s.conn.CountDropped(int(min(n, 1<<31-1)))
	b = append(b, `{"op":"dropped","count":`...)
	b = strconv.AppendUint(b, n, 10)
	return append(b, '}')
}
