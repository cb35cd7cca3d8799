package private

import (
	"errors"
	"sync/atomic"

	"github.com/edgemux/edgemux/route/bus"
)

// Writes that reach devices. A PUB to a topic a device's poller claims
// (protocols/modbus/poll) is a write to the device. With a msg id its ACK
// says what the device did: it is held until the write is done
// (bus.PublishDone) and is then status 0 (the device took it, and the
// value read back matched when the tag reads back) or WRITE_FAILED (it
// refused it, did not answer, its line was down). A PUB to any other
// topic is acknowledged at once and costs nothing more than before; a
// PUB without a msg id is fire and forget. Held ACKs are written as they
// are done, so they may overtake one another (each names its msg id);
// at most maxHeldAcks per connection, past which a PUB with a msg id to
// a claimed topic is BUSY with nothing written.

// maxHeldAcks bounds the ACKs one connection waits for devices to earn.
const maxHeldAcks = 64

// heldAck is one PUB's ACK waiting for its write.
type heldAck struct {
	msgID uint32
	err   error        // the outcome, set before state becomes ackDone
	state atomic.Int32 // ackServing, ackHeld, ackDone
}

// heldAcks is a session's list of held ACKs, kept by its publisher: most
// sessions never wait for a device write, and a slice header in the
// session (24 bytes) would cost every idle connection a size class (64 ->
// 80).
type heldAcks []*heldAck

const (
	ackServing int32 = iota // PublishDone has not returned yet
	ackHeld                 // queued in the session: the worker must be woken
	ackDone
)

// publishAcked publishes m to a claimed topic, m's ACK wanted, and
// appends the ACK when the write is done already; otherwise it is held,
// and Notified writes it.
func (s *session) publishAcked(out []byte, topic string, m Pub) ([]byte, error) {
	p := s.publisher()
	if len(p.held) >= maxHeldAcks {
		return s.reject(out, m.MsgID, CodeBusy, "too many PUBs waiting for devices")
	}
	a := &heldAck{msgID: m.MsgID}
	conn := s.conn
	err := s.h.bus.PublishDone(&s.quota, topic, m.Data, Source, func(err error) {
		a.err = err
		if !a.state.CompareAndSwap(ackServing, ackDone) {
			a.state.Store(ackDone)
			conn.Notify()
		}
	})
	if err != nil {
		return s.reject(out, m.MsgID, pubCode(err), err.Error())
	}
	s.h.published.Add(s.stripe, 1)
	if a.state.CompareAndSwap(ackServing, ackHeld) {
		p.held = append(p.held, a)
		return out, nil
	}
	return s.ackWrite(out, a), nil
}

// ackWrite appends the ACK of a done write.
func (s *session) ackWrite(out []byte, a *heldAck) []byte {
	if a.err == nil {
		return AppendAck(out, Ack{MsgID: a.msgID})
	}
	s.h.rejected.Add(1)
	code := CodeInternal
	if errors.Is(a.err, bus.ErrWriteFailed) {
		code = CodeWriteFailed
	}
	return AppendAck(out, Ack{MsgID: a.msgID, Status: code})
}

// flushHeld writes the held ACKs that are done, keeping the others.
func (s *session) flushHeld() error {
	if s.pub == nil || len(s.pub.held) == 0 {
		return nil
	}
	buf := s.h.out.Get(0)
	defer s.h.out.Put(buf)
	out := (*buf)[:0]
	held := s.pub.held
	keep := held[:0]
	for _, a := range held {
		if a.state.Load() == ackDone {
			out = s.ackWrite(out, a)
		} else {
			keep = append(keep, a)
		}
	}
	clear(held[len(keep):]) // written ACKs are let go
	s.pub.held = keep
	*buf = out
	_, err := s.flush(out)
	return err
}
