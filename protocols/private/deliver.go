package private

import (
	"sync"

	"golang.org/x/sys/cpu"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// Deliveries. A session takes messages from its bus subscriber only while
// the connection's output is empty, that is while the socket takes what it
// is given, and a bounded batch at a time. So a burst, or the replay of a
// filter over the whole cache, waits in the bus (where the queue is
// bounded in bytes and the replay is read as it goes) rather than in the
// output buffer, where it would pass the high-water mark and cost the
// client its connection; publishers never wait; and between batches the
// worker serves its other connections. When the socket is full the
// session waits for Writable; after deliverRounds batches it yields with
// Conn.Notify and carries on after the worker's other work.
//
// What the bus dropped anyway (a subscriber that does not read while its
// queue overflows) is told before the next delivery: a DROPPED frame with
// the count (SPEC.md 2.7), also counted per connection (Conn.CountDropped,
// the gateway's registry view) and in Stats.Dropped.

const (
	// deliverBatch is one batch, in the bus's queue bytes: about what its
	// frames take (80 bytes of queue slot stand for the PUB header).
	deliverBatch = flushAt
	// deliverRounds is how many batches one call writes at most.
	deliverRounds = 8
)

// Notified writes the held ACKs that are done, then delivers what the
// subscriber has, as PUB frames.
func (s *session) Notified() (err error) {
	defer s.recoverPanic(&err)
	if err := s.flushHeld(); err != nil { // writeack.go
		return err
	}
	if s.sub == nil {
		return nil
	}
	return s.deliver()
}

// Writable resumes deliveries that waited for the socket to take the
// output.
func (s *session) Writable() (err error) {
	if !s.waiting || s.sub == nil {
		return nil
	}
	defer s.recoverPanic(&err)
	s.waiting = false
	return s.deliver()
}

// deliver writes batches while the socket takes them. A batch whose
// frames are all shared with other subscribers (a fan-out) is written
// with protocols.SharedWriter where the connection has it, so what the
// socket leaves of it stays as references to the shared frames.
func (s *session) deliver() error {
	scratch := s.h.deliveries.get()
	defer s.h.deliveries.put(scratch)
	msgs, buf, frames := &scratch.msgs, &scratch.out, &scratch.frames
	sw, _ := s.conn.(protocols.SharedWriter)
	for round := 0; ; round++ {
		if s.sub.Disconnected() { // the bus's Disconnect policy cut us off
			out, err := s.fatal((*buf)[:0], CodeSlowConsumer, nil)
			*buf = out
			_ = s.conn.Write(out)
			return err
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
		out := (*buf)[:0]
		if batch.Dropped > 0 {
			out = s.dropped(out, batch.Dropped)
		}
		shared := sw != nil && batch.Dropped == 0
		clear(*frames)
		*frames = (*frames)[:0]
		for i := range batch.Msgs {
			var frame []byte
			out, frame = s.appendDelivery(out, &batch.Msgs[i])
			if shared = shared && frame != nil; shared {
				*frames = append(*frames, frame)
			}
		}
		// Every payload is copied into out or into a shared frame by
		// now: the recycled ones may go back (bus.Subscriber.Recycle).
		s.sub.Release(batch.Msgs)
		*buf = out
		var err error
		if shared {
			err = s.flushed(sw.WriteShared(out, *frames))
		} else {
			_, err = s.flush(out)
		}
		if err != nil {
			return err
		}
		if !batch.More {
			return nil
		}
	}
}

// deliverScratch is what one deliver call works in: the drained messages,
// the frames staged for the socket and, of those, the shared ones. The
// three come from one pool, one Get and one Put per call: a fan-out
// makes a call per subscriber per publish, and pooling them apart, a
// quarter of a 1,000-subscriber fan-out's time went to the pools.
type deliverScratch struct {
	msgs   []bus.Message
	out    []byte
	frames [][]byte
	_      cpu.CacheLinePad // written on every call: apart from the next one's
}

// deliverScratches pools deliverScratch; slices grown past the bounds
// are dropped on put, so one burst does not pin memory.
type deliverScratches struct{ pool sync.Pool }

func (d *deliverScratches) get() *deliverScratch {
	if s, ok := d.pool.Get().(*deliverScratch); ok {
		return s
	}
	return &deliverScratch{msgs: make([]bus.Message, 0, 16), out: make([]byte, 0, 512), frames: make([][]byte, 0, 16)}
}

// batchMsgs bounds the messages of one batch: each counts 80 bytes of
// queue slot besides its topic and payload.
const batchMsgs = deliverBatch/80 + 1

func (d *deliverScratches) put(s *deliverScratch) {
	// The bounds leave room for append, which grows a slice up to twice
	// what it holds: at 1,024 a full batch's frames (820) outgrew them,
	// and every full round of a fan-out dropped its scratch.
	if cap(s.msgs) > 2*batchMsgs || cap(s.out) > 2*flushAt || cap(s.frames) > 2*batchMsgs {
		return
	}
	clear(s.msgs) // pin no message, topic or frame
	clear(s.frames)
	s.msgs, s.out, s.frames = s.msgs[:0], s.out[:0], s.frames[:0]
	d.pool.Put(s)
}

// dropped counts n lost deliveries and appends the DROPPED frame that
// tells the client.
func (s *session) dropped(out []byte, n uint64) []byte {
	s.h.dropped.Add(n)
	s.conn.CountDropped(int(min(n, 1<<31-1)))
	return AppendDropped(out, n)
}

// pubEncoding is the PUB frame of a delivery, which is the same bytes for
// every subscriber (no per-subscription field: msg id 0, flags from the
// message): encoded once per message, CRC included, and copied by the
// others (bus.Message.Encoded).
var pubEncoding = bus.NewEncoding("private.pub")

// appendDelivery appends one message as a PUB frame: the shared frame
// when another subscriber encoded it already, else encoded here (and
// shared, when the message can be). shared is the frame appended when it
// is one the message shares, nil otherwise.
func (s *session) appendDelivery(out []byte, m *bus.Message) (_, shared []byte) {
	if frame := m.Encoded(pubEncoding); frame != nil {
		s.h.delivered.Add(s.stripe, 1)
		return append(out, frame...), frame
	}
	dst := out
	if m.Shared() {
		dst = make([]byte, 0, pubLen(m)) // exact size: the array is shared, never appended to
	}
	var flags uint8
	if m.Retained {
		flags = PubRetained
	}
	frame, err := appendPub(dst, pubHead{flags: flags, ts: m.TS}, m.Topic, m.Src, m.Payload)
	if err != nil { // a source name over 255 bytes: not ours to fix, skip it
		s.h.log.Warn("delivery not encodable", "topic", m.Topic, "src", m.Src, "err", err)
		return out, nil
	}
	s.h.encoded.Add(s.stripe, 1)
	s.h.delivered.Add(s.stripe, 1)
	if !m.Shared() {
		return frame, nil
	}
	frame = m.SetEncoded(pubEncoding, frame)
	return append(out, frame...), frame
}

// pubLen is the size of m's PUB frame.
func pubLen(m *bus.Message) int {
	return HeaderLen + 4 + 1 + 2 + len(m.Topic) + 8 + 1 + len(m.Src) + len(m.Payload)
}
