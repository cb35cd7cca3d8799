package modbus

import (
	"errors"
	"sync/atomic"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/modbus/upstream"
)

// Gateway mode: a request for a unit id that modbus.upstream maps to a
// device (devices[].gateway_unit) goes to that device's line; the answer
// comes back on the line's goroutine, which stores it and wakes the
// session's worker (Conn.Notify). Responses still leave in request order:
// while a forwarded request is outstanding, later answers (local ones
// too) wait behind it in the session's queue.

// maxPending is how many requests of one master may wait for upstream
// answers; past it a forwarded request is answered 0x0A at once (in its
// turn). Stopping to read instead would stall: the worker offers the
// unread input again only when more arrives.
const maxPending = 64

// pending is one response owed to the master, in request order.
type pending struct {
	adu    ADU    // header of the request (its PDU is not kept)
	fc     byte   // its function, for an exception
	out    []byte // a local answer, ready
	result upstream.Result
	writes *deviceWrites // a write waiting for devices: out is its response if they all took it
	done   atomic.Bool   // result is set (forwarded), out is (local), or writes are done
}

var _ protocols.Notified = (*session)(nil)

// forward sends adu's request to dev and queues the response owed.
func (s *session) forward(dev *upstream.Device, adu ADU) {
	p := &pending{adu: ADU{Transaction: adu.Transaction, Unit: adu.Unit}}
	if len(adu.PDU) > 0 {
		p.fc = adu.PDU[0]
	}
	s.queue = append(s.queue, p)
	if len(s.queue) > maxPending {
		p.result = upstream.Result{Err: upstream.ErrQueueFull}
		p.done.Store(true)
		return
	}
	s.h.n.forwarded.Add(1)
	conn := s.conn
	dev.Submit(adu.PDU, func(r upstream.Result) {
		p.result = r
		p.done.Store(true)
		conn.Notify()
	})
}

// Notified writes the responses whose turn has come.
func (s *session) Notified() error {
	if err := s.flush(); err != nil {
		return err
	}
	if s.draining && len(s.queue) == 0 && !s.partial {
		return protocols.ErrShutdown
	}
	return nil
}

// flush writes the answers at the head of the queue that are done.
func (s *session) flush() error {
	h := s.h
	p := h.out.Get(0)
	defer h.out.Put(p)
	out := (*p)[:0]
	k := 0
	for ; k < len(s.queue) && s.queue[k].done.Load(); k++ {
		q := s.queue[k]
		if q.writes != nil {
			out = h.writeAnswer(out, q)
			continue
		}
		if q.out != nil {
			out = append(out, q.out...)
			continue
		}
		out = h.upstreamAnswer(out, q)
	}
	s.queue = s.queue[:copy(s.queue, s.queue[k:])]
	*p = out
	if len(out) == 0 {
		return nil
	}
	return s.write(out)
}

// upstreamAnswer appends the response to a forwarded request: the
// device's own (normal or exception), 0x0B when it did not answer in
// time (or is demoted for not answering), 0x0A when there is no path to
// it (no connection, its line's queue full), 0x01 for a request that
// cannot go over its line.
func (h *Handler) upstreamAnswer(out []byte, q *pending) []byte {
	r := q.result
	if r.Err == nil {
		h.n.requests.Add(1)
		if len(r.PDU) == 0 { // a broadcast: nobody answers it
			return out
		}
		out = appendHeader(out, q.adu, len(r.PDU))
		return append(out, r.PDU...)
	}
	h.n.upstreamFailed.Add(1)
	code := byte(GatewayTargetFailed)
	switch {
	case errors.Is(r.Err, upstream.ErrUnavailable), errors.Is(r.Err, upstream.ErrQueueFull), errors.Is(r.Err, upstream.ErrClosed):
		code = GatewayPathUnavailable
	case errors.Is(r.Err, upstream.ErrBadRequest):
		code = IllegalFunction
	}
	h.n.requests.Add(1)
	h.n.exceptions.Add(1)
	return AppendException(out, q.adu, q.fc, code)
}
