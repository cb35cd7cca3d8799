package modbus

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/modbus/upstream"
	"github.com/edgemux/edgemux/route/bus"
)

// Writes that reach devices. A register-map tag on a topic the poller
// claims (protocols/modbus/poll) is a device's value: a master writing it
// writes the device. Its response says what the device did, so it waits
// until every device write the request caused is done (bus.PublishDone),
// in the session's queue of responses owed (forward.go), which keeps the
// master's order; a write that touches no claimed tag is done at once and
// answered as before. A device that took the write gives the normal write
// response; one that answered with an exception, or whose read-back did
// not hold the value, gives 0x04 (server device failure); one that did not
// answer (its timeout, demoted, its line down or closing, the line's queue
// full) gives 0x0B (gateway target device failed to respond). With
// maxPending responses owed already, a write is answered 0x06 (server
// device busy) in its turn, and nothing is written.

// deviceWrites counts one request's device writes not yet done.
type deviceWrites struct {
	p    *pending // the response owed, done when the writes are
	conn protocols.Conn
	// left is the writes not done, plus one while the request is served,
	// so writes done before it is queued cannot finish it early.
	left atomic.Int32
	mu   sync.Mutex
	err  error // the first failure
}

// writeWaiter serves one register-map request: it starts counting device
// writes at the first tag whose topic a Writer claims, so a request that
// touches none costs nothing more than before.
type writeWaiter struct {
	conn protocols.Conn
	w    *deviceWrites // nil until a claimed tag is written
}

// publish hands one tag's new value to the bus: a write to a claimed
// topic is counted until done. Without a waiter (nil) it is a plain
// publish.
func (ww *writeWaiter) publish(b *bus.Bus, q *bus.Quota, topic string, text []byte) error {
	if ww == nil || !b.Claimed(topic) {
		return b.PublishWithin(q, topic, text, Source)
	}
	if ww.w == nil {
		ww.w = &deviceWrites{p: &pending{}, conn: ww.conn}
		ww.w.left.Store(1)
	}
	w := ww.w
	w.left.Add(1)
	err := b.PublishDone(q, topic, text, Source, w.done)
	if err != nil {
		w.left.Add(-1) // refused: never done
	}
	return err
}

// done is one write's outcome, on any goroutine: the last one wakes the
// session, whose worker then writes the response in its turn.
func (w *deviceWrites) done(err error) {
	if err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	if w.left.Add(-1) == 0 {
		w.p.done.Store(true)
		w.conn.Notify()
	}
}

// served drops the request's own hold once it is served and reports
// whether every write is already done.
func (w *deviceWrites) served() bool {
	if w.left.Add(-1) == 0 {
		w.p.done.Store(true)
		return true
	}
	return false
}

// failure is the first write that failed, or nil; read once done.
func (w *deviceWrites) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// isWrite reports whether a request is a write of the register map.
func isWrite(adu ADU) bool {
	if len(adu.PDU) == 0 {
		return false
	}
	switch adu.PDU[0] {
	case WriteSingleCoil, WriteSingleRegister, WriteMultipleCoils, WriteMultipleRegisters:
		return true
	}
	return false
}

// serveLocal answers a request for the register map: at once (appended
// to out) when nothing is queued ahead of it and it waits for no device,
// else in its turn through the queue.
func (s *session) serveLocal(out []byte, adu ADU) []byte {
	h := s.h
	if len(s.queue) >= maxPending && isWrite(adu) {
		// A master this far ahead of its answers writes nothing more
		// until they are out: busy, in its turn.
		h.n.requests.Add(1)
		h.n.exceptions.Add(1)
		p := &pending{out: AppendException(nil, adu, adu.PDU[0], ServerDeviceBusy)}
		p.done.Store(true)
		s.queue = append(s.queue, p)
		return out
	}
	mark := len(out)
	wait := writeWaiter{conn: s.conn}
	out = h.serve(out, adu, &s.quota, &wait)
	w := wait.w
	if w == nil || isException(out[mark:]) {
		// No device to wait for; or refused before any device answered,
		// said at once (in its turn): writes already handed on still
		// publish their outcome.
		if len(s.queue) == 0 {
			return out
		}
		p := &pending{out: bytes.Clone(out[mark:])}
		p.done.Store(true)
		s.queue = append(s.queue, p)
		return out[:mark]
	}
	p := w.p
	p.adu, p.fc = ADU{Transaction: adu.Transaction, Unit: adu.Unit}, adu.PDU[0]
	p.out, p.writes = bytes.Clone(out[mark:]), w
	if w.served() && len(s.queue) == 0 && w.failure() == nil {
		return out
	}
	s.queue = append(s.queue, p)
	return out[:mark]
}

// isException reports whether a response ADU is an exception.
func isException(adu []byte) bool {
	return len(adu) > 7 && adu[7]&0x80 != 0
}

// writeAnswer appends the response to a register-map write whose device
// writes are done: the write response, or the exception for the first
// failure.
func (h *Handler) writeAnswer(out []byte, q *pending) []byte {
	err := q.writes.failure()
	if err == nil {
		return append(out, q.out...)
	}
	h.n.writesFailed.Add(1)
	h.n.exceptions.Add(1)
	return AppendException(out, q.adu, q.fc, writeFailed(err))
}

// writeFailed is the exception for a device write that failed.
func writeFailed(err error) byte {
	for _, noAnswer := range []error{upstream.ErrTimeout, upstream.ErrDemoted, upstream.ErrUnavailable,
		upstream.ErrClosed, upstream.ErrQueueFull} {
		if errors.Is(err, noAnswer) {
			return GatewayTargetFailed
		}
	}
	return ServerDeviceFailure
}
