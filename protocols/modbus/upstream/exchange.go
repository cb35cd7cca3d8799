package upstream

import (
	"errors"
	"fmt"
	"time"

	"github.com/edgemux/edgemux/protocols/modbus/wire"
)

// isAnswerError reports whether err came from the device's answer (or
// its silence) rather than from a broken stream: the port stays open.
func isAnswerError(err error) bool {
	return errors.Is(err, ErrTimeout) || errors.Is(err, wire.ErrCRC) || errors.Is(err, wire.ErrMismatch)
}

// exchangeMBAP sends pdu with a fresh transaction id and reads until the
// response carrying that id arrives. Responses with another id answer
// earlier requests that timed out: they are counted and dropped, never
// given to this one (goburrow #64).
func (l *Line) exchangeMBAP(d *Device, pdu []byte) Result {
	l.tid++
	tid, unit := l.tid, d.cfg.Unit
	var buf [wire.MaxMBAP]byte
	frame := wire.AppendMBAP(buf[:0], tid, unit, pdu)
	deadline := time.Now().Add(d.cfg.Timeout)
	start := time.Now()
	if err := l.write(frame, deadline); err != nil {
		return Result{Err: err}
	}
	if unit == 0 {
		return Result{RTT: time.Since(start)}
	}
	for {
		got, gotUnit, resp, n, err := wire.ParseMBAP(l.in)
		if err != nil {
			return Result{Err: err}
		}
		if n > 0 {
			stale := got != tid || gotUnit != unit
			if !stale {
				if err := wire.CheckResponse(pdu, resp); err != nil {
					return Result{Err: err}
				}
				out := append([]byte(nil), resp...)
				l.consume(n)
				return Result{PDU: out, RTT: time.Since(start)}
			}
			d.health.count(func(h *Health) { h.Stale++ })
			l.consume(n)
			continue
		}
		if err := l.fill(deadline); err != nil {
			return Result{Err: err}
		}
	}
}

// exchangeRTU sends pdu as an RTU frame after the line has been quiet
// for t3.5, and reads the response frame, its length known from its
// header. Bytes already waiting (a late answer to an earlier request)
// are dropped first; a frame from another unit, or one that does not
// answer this request (CheckResponse), is counted stale and skipped. A
// damaged frame is ErrCRC, which the caller retries and counts apart.
func (l *Line) exchangeRTU(d *Device, pdu []byte) Result {
	if err := l.discardPending(d); err != nil {
		return Result{Err: err}
	}
	if wait := l.timing.T35 - time.Since(l.quietAt); wait > 0 {
		time.Sleep(wait)
	}
	var buf [wire.MaxRTU]byte
	unit := d.cfg.Unit
	frame := wire.AppendRTU(buf[:0], unit, pdu)
	start := time.Now()
	timeout := l.timing.ResponseTimeout(len(frame), pdu, d.cfg.Timeout)
	deadline := start.Add(timeout)
	err := l.write(frame, deadline)
	l.quietAt = time.Now()
	if err != nil {
		return Result{Err: err}
	}
	if unit == 0 {
		// Nobody answers a broadcast; the turnaround delay lets the
		// devices act on it before the next frame.
		l.sleep(max(d.cfg.Delay, 4*l.timing.T35))
		return Result{RTT: time.Since(start)}
	}
	for {
		gotUnit, resp, n, err := wire.ParseRTU(l.in)
		switch {
		case errors.Is(err, wire.ErrCRC):
			l.consume(n)
			return Result{Err: err}
		case err != nil: // a function we cannot frame: drop a byte, resynchronise
			l.consume(1)
			continue
		case n > 0:
			if gotUnit == unit && wire.CheckResponse(pdu, resp) == nil {
				out := append([]byte(nil), resp...)
				l.consume(n)
				l.quietAt = time.Now()
				return Result{PDU: out, RTT: time.Since(start)}
			}
			d.health.count(func(h *Health) { h.Stale++ })
			l.consume(n)
			continue
		}
		if err := l.fill(deadline); err != nil {
			l.quietAt = time.Now()
			return Result{Err: err}
		}
	}
}

// discardPending drops what arrived while nothing was asked: on a serial
// line, only an earlier request's late answer or noise.
func (l *Line) discardPending(d *Device) error {
	for {
		err := l.fill(time.Now().Add(time.Millisecond))
		if errors.Is(err, ErrTimeout) {
			break
		}
		if err != nil {
			return err
		}
	}
	if len(l.in) > 0 {
		d.health.count(func(h *Health) { h.Stale++ })
		l.in = l.in[:0]
		l.quietAt = time.Now()
	}
	return nil
}

func (l *Line) write(frame []byte, deadline time.Time) error {
	if err := l.port.SetWriteDeadline(deadline); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if _, err := l.port.Write(frame); err != nil {
		if isTimeout(err) {
			return ErrTimeout
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// fill reads what the port has into l.in, waiting until deadline.
func (l *Line) fill(deadline time.Time) error {
	if len(l.in) >= 4*wire.MaxMBAP {
		return fmt.Errorf("%w: %d bytes unframed", wire.ErrLength, len(l.in))
	}
	if err := l.port.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var buf [512]byte
	n, err := l.port.Read(buf[:])
	l.in = append(l.in, buf[:n]...)
	switch {
	case n > 0:
		return nil
	case err == nil:
		return nil
	case isTimeout(err):
		return ErrTimeout
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// consume drops the first n bytes of the input.
func (l *Line) consume(n int) {
	l.in = l.in[:copy(l.in, l.in[n:])]
}
