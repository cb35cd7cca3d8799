package websocket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"time"
	"unicode/utf8"

	gorilla "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// session is one connection's state. The owning worker calls it from one
// goroutine at a time, so it needs no locks. Between calls it holds no
// buffer unless a message is half received (part), and no gorilla Conn:
// it borrows one with its lease for each call (lease.go).
type session struct {
	h    *Handler
	conn protocols.Conn
	l    *lease          // borrowed for one call; nil between calls
	sub  *bus.Subscriber // created on the first sub, closed after the last unsub
	part *[]byte         // raw frames of a message still arriving (pooled); nil otherwise
	subs []subscription
	scan Scanner

	missed    uint8            // pings sent since the peer last sent a frame
	upgraded  bool             // the handshake is done: frames follow
	closing   bool             // an HTTP error or close frame is staged: handle nothing more
	goingAway bool             // the close frame is Drain's: the peer's answer ends the connection
	waiting   bool             // deliveries wait for the output to drain (Writable)
	stripe    protocols.Stripe // this session's cell of the handler's per-message counters
	quota     bus.Quota        // new topics this connection added to the bus's cache (4 bytes)
	operator  uint32           // the operator check's epoch that admitted the handshake; 0 = not an operator
}

// subscription is one filter and whether it wants retained values.
type subscription struct {
	filter   string
	retained bool
}

var (
	_ protocols.Session  = (*session)(nil)
	_ protocols.Notified = (*session)(nil)
	_ protocols.Writable = (*session)(nil)
	_ protocols.Timed    = (*session)(nil)
)

// errClosing is returned to a worker that calls a closing session again.
var errClosing = errors.New("websocket: session closing")

// Data handles the HTTP request, then frames. Output is staged and
// written in one piece when the call ends.
func (s *session) Data(in []byte) (n int, err error) {
	if s.closing {
		if s.goingAway {
			return len(in), protocols.ErrShutdown
		}
		return len(in), errClosing
	}
	if err := s.begin(); err != nil {
		return 0, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = s.panicked(r)
		}
		err = s.end(err)
	}()
	if !s.upgraded {
		return s.handshake(in)
	}
	return s.frames(in)
}

// Timer is the handshake deadline before the upgrade and the keepalive
// after it: a ping every ping_interval, and a close when missed_pongs of
// them in a row went unanswered.
func (s *session) Timer() (err error) {
	if s.closing {
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
	if !s.upgraded {
		s.h.n.handshakeTimeouts.Add(1)
		s.httpError(http.StatusRequestTimeout, "request not complete within "+s.cfg().HandshakeTimeout.String())
		return ErrHandshakeTimeout
	}
	if s.operatorChanged() {
		return s.closeWith(ClosePolicy, "operator access changed", ErrOperatorChanged)
	}
	if int(s.missed) >= s.cfg().MissedPongs {
		s.h.n.pongTimeouts.Add(1)
		return s.closeWith(ClosePolicy, "ping timeout", ErrPongTimeout)
	}
	s.missed++
	s.conn.SetTimer(s.cfg().PingInterval)
	return s.writeControl(gorilla.PingMessage, nil)
}

// Closed releases the subscription and whatever was half received.
func (s *session) Closed(error) {
	s.closing = true
	if s.sub != nil {
		s.sub.Close()
		s.sub = nil
	}
	s.subs = nil
	if s.part != nil {
		s.h.buf.Put(s.part)
		s.part = nil
	}
}

// begin borrows a lease for one call: the staging buffer, and gorilla's
// Conn once upgraded.
func (s *session) begin() error {
	variant := bare
	switch {
	case s.upgraded && s.scan.Deflate:
		variant = deflate
	case s.upgraded:
		variant = plain
	}
	l, err := s.h.lend(s, variant)
	if err != nil {
		s.closing = true
		return err
	}
	s.l = l
	s.scan.MaxMessage = int64(l.set.cfg.MaxMessage)
	return nil
}

// cfg is the configuration of the current call.
func (s *session) cfg() *config.WebSocket { return &s.l.set.cfg }

// end writes what the call staged and gives the lease back. When the call
// failed, what is staged is an HTTP error or a close frame: it is written
// if the output buffer takes it, and the connection closes either way.
func (s *session) end(err error) error {
	if err == nil && s.closing && !s.goingAway {
		err = fmt.Errorf("%w: gorilla closed the connection", ErrInternal)
	}
	if err == nil {
		err = s.flush()
	}
	l := s.l
	if err != nil && len(l.out) > 0 {
		_ = s.conn.Write(l.out) // best effort: the peer may not read
	}
	s.l = nil
	s.h.giveBack(l, err == nil)
	return err
}

// panicked turns a recovered panic into a closing error; nothing staged
// in the broken call is sent, but the peer is told why (tellInternal).
// The panic is logged here, with the stack that led to it, because the
// close reason carries only its value and a bug needs the place too.
func (s *session) panicked(r any) error {
	s.h.log.Error("session panic", "conn", s.conn.ID(), "panic", r, "stack", string(debug.Stack()))
	s.l.resetOut()
	s.tellInternal()
	s.closing = true
	return fmt.Errorf("%w: %v", ErrPanic, r)
}

// tellInternal stages the protocol's own words for a fault of the
// gateway's: a close frame 1011 when the peer had its 101 before this
// call (lease.opened), else an HTTP 500, since a 101 this call staged was
// never sent. Should that panic too (gorilla left broken by the first),
// nothing is sent.
func (s *session) tellInternal() {
	defer func() {
		if recover() != nil {
			s.l.resetOut()
		}
	}()
	switch {
	case s.closing:
	case s.l.opened:
		_ = s.closeWith(CloseInternal, "internal error", nil)
	default:
		s.httpError(http.StatusInternalServerError, "internal error")
	}
}

// flush hands the staged output to the connection. Past the high-water
// mark (websocket.high_water, or the gateway's own, reported as
// ErrBackpressure) the slow-consumer policy decides. A peer with nothing
// buffered is not slow: what is staged is tried however big it is (the
// gateway may still refuse it).
func (s *session) flush() error {
	l := s.l
	if len(l.out) == 0 {
		return nil
	}
	staged, deliveries := int(l.batch), uint64(l.deliveries)
	l.batch, l.deliveries = 0, 0
	var err error
	sw, _ := s.conn.(protocols.SharedWriter)
	switch buffered := s.conn.Buffered(); {
	case buffered > 0 && buffered+len(l.out) > s.cfg().HighWater:
		err = protocols.ErrBackpressure
	case len(l.shared) > 0 && sw != nil:
		err = sw.WriteShared(l.out, l.stagedFrames())
		clear(l.frames)
	default:
		err = s.conn.Write(l.out)
	}
	l.resetOut()
	switch {
	case err == nil:
		s.h.n.delivered.Add(s.stripe, deliveries)
	case errors.Is(err, protocols.ErrBackpressure):
		return s.slow(staged)
	}
	return err
}

// maxServerHeader is the longest header of a frame the server sends.
const maxServerHeader = 10

// wouldOverflow reports whether staging a message of n bytes would pass
// the high-water mark: under the drop policy it is dropped instead, so
// what is staged always fits.
func (s *session) wouldOverflow(n int) bool {
	pending := s.conn.Buffered() + len(s.l.out)
	return pending > 0 && pending+n+maxServerHeader > s.cfg().HighWater
}

// slow applies the slow-consumer policy to staged messages that did not
// fit: drop counts and forgets them, close closes with 1008 (a close frame
// that may not fit either).
func (s *session) slow(staged int) error {
	if s.l.set.drop && s.upgraded {
		s.h.n.slowDrop.Add(uint64(staged))
		return nil
	}
	s.h.n.slowClosed.Add(1)
	return s.closeWith(ClosePolicy, "slow consumer", fmt.Errorf("%w: %d bytes buffered", ErrSlowConsumer, s.conn.Buffered()))
}

// frames scans the input: control frames are answered and removed, the
// bytes of data frames are collected until their message is complete,
// then the message is read through gorilla. Incomplete headers and
// control frames stay unconsumed (the worker keeps them); a data frame's
// payload is consumed as it arrives.
func (s *session) frames(in []byte) (int, error) {
	pos, run := 0, -1 // run: where this call's bytes of the current message start
	for pos < len(in) && !s.closing {
		ev, err := s.scan.Next(in[pos:])
		if err != nil {
			return pos, s.violation(err)
		}
		switch ev.Kind {
		case NeedMore:
			s.keep(in, run, pos)
			return pos, nil
		case Control:
			s.keep(in, run, pos) // the message's bytes must stay contiguous
			run = -1
			s.missed = 0
			err = s.control(ev.Header, in[pos+ev.Header.Size:pos+ev.N])
		default:
			if ev.Kind == DataHeader {
				s.missed = 0
			}
			if run < 0 {
				run = pos
			}
			if ev.End {
				err = s.message(in[run : pos+ev.N])
				run = -1
			}
		}
		pos += ev.N
		if err != nil {
			return pos, err
		}
	}
	s.keep(in, run, pos)
	return pos, nil
}

// keep copies this call's bytes of an unfinished message to part.
func (s *session) keep(in []byte, run, pos int) {
	if run < 0 || pos <= run {
		return
	}
	if s.part == nil {
		s.part = s.h.buf.Get(pos - run)
	}
	*s.part = append(*s.part, in[run:pos]...)
}

// control answers one control frame.
func (s *session) control(h Header, payload []byte) error {
	var buf [MaxControlPayload]byte
	p := buf[:copy(buf[:], payload)]
	unmask(h.Mask, p)
	switch h.Opcode {
	case OpPing:
		return s.writeControl(gorilla.PongMessage, p)
	case OpClose:
		return s.peerClose(p)
	}
	return nil // a pong: liveness is all it says
}

// peerClose checks a close frame, echoes its code and ends the session.
func (s *session) peerClose(p []byte) error {
	s.h.n.peerCloses.Add(1)
	switch {
	case len(p) == 0:
		_ = s.writeControl(gorilla.CloseMessage, nil)
		s.closing = true
		return ErrPeerClose
	case len(p) == 1:
		return s.violation(fmt.Errorf("%w: close frame with a one-byte payload", ErrProtocol))
	}
	code := binary.BigEndian.Uint16(p)
	if !validCloseCode(code) {
		return s.violation(fmt.Errorf("%w: close code %d", ErrProtocol, code))
	}
	if !utf8.Valid(p[2:]) {
		return s.violation(fmt.Errorf("%w: close reason is not UTF-8", ErrInvalidPayload))
	}
	_ = s.writeControl(gorilla.CloseMessage, p[:2])
	s.closing = true
	return fmt.Errorf("%w: code %d", ErrPeerClose, code)
}

// validCloseCode accepts the codes a peer may send (RFC 6455 §7.4 and the
// IANA registry): not 1004-1006 or 1015, which mean something only
// locally, nor unassigned ones.
func validCloseCode(code uint16) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	}
	return code >= 3000 && code <= 4999
}

// message reads one complete message (its raw frames: tail, after what
// part holds) through gorilla, checks it and handles it.
func (s *session) message(tail []byte) error {
	raw, part := tail, s.part
	s.part = nil // an idle session holds no input
	if part != nil {
		*part = append(*part, tail...)
		raw = *part
	}
	s.h.n.messages.Add(s.stripe, 1)
	bp := s.h.buf.Get(len(raw))
	typ, data, err := s.read(raw, (*bp)[:0])
	if part != nil {
		s.h.buf.Put(part)
	}
	if err == nil {
		err = s.handleMessage(typ, data)
	}
	*bp = data[:0]
	s.h.buf.Put(bp)
	return err
}

// read has gorilla read the message in raw (unmask, inflate) into dst.
func (s *session) read(raw, dst []byte) (int, []byte, error) {
	l := s.l
	l.feed = raw
	typ, r, err := l.ws.NextReader()
	if err == nil {
		dst, err = readAll(r, dst, s.cfg().MaxMessage)
		if c, ok := r.(io.Closer); ok {
			_ = c.Close() // hands an inflater back to gorilla's pool
		}
	}
	left := l.residue()
	l.feed = nil
	switch {
	case err == nil && left > 0 && s.scan.Deflate:
		// The deflate stream ended (a final block) before the frames did.
		err = fmt.Errorf("%w: %d bytes after the end of the compressed data", ErrInvalidPayload, left)
	case err == nil && left > 0:
		err = fmt.Errorf("%w: gorilla left %d bytes of the message", ErrInternal, left)
	case err == nil:
		return typ, dst, nil
	case errors.Is(err, ErrTooBig):
	case errors.Is(err, errNoInput):
		err = fmt.Errorf("%w: %w", ErrInternal, err)
	default: // the inflater's complaint: the payload is not deflate data
		err = fmt.Errorf("%w: %w", ErrInvalidPayload, err)
	}
	return typ, dst, s.violation(err)
}

// readAll reads r to EOF into dst, failing with ErrTooBig past limit
// bytes (an inflated message may be far larger than its frames).
func readAll(r io.Reader, dst []byte, limit int) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(max(cap(dst), 512), limit+1-len(dst)))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		switch {
		case len(dst) > limit:
			return dst, fmt.Errorf("%w: inflates past %d bytes", ErrTooBig, limit)
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return dst, err
		}
	}
}

// handleMessage applies the JSON protocol to a text message.
func (s *session) handleMessage(typ int, data []byte) error {
	if typ != gorilla.TextMessage {
		return s.replyError("binary", "send JSON in text messages")
	}
	if !utf8.Valid(data) {
		return s.violation(fmt.Errorf("%w: text message is not UTF-8", ErrInvalidPayload))
	}
	return s.request(data)
}

// violation closes the connection for what err says the peer did wrong:
// 1009 for a message too big, 1007 for invalid payload data, 1011 for
// our own bug, 1002 for everything else.
func (s *session) violation(err error) error {
	code := CloseProtocolError
	switch {
	case errors.Is(err, ErrTooBig):
		s.h.n.tooBig.Add(1)
		return s.closeWith(CloseTooBig, "message too big", err)
	case errors.Is(err, ErrInternal):
		s.h.log.Error("gorilla disagrees with the frame scanner", "conn", s.conn.ID(), "err", err)
		return s.closeWith(CloseInternal, "internal error", err)
	case errors.Is(err, ErrInvalidPayload):
		code = CloseInvalidPayload
	}
	s.h.n.violations.Add(1)
	return s.closeWith(code, closeReason(err), fmt.Errorf("%w: %w", err, protocols.ErrMalformed))
}

// closeReason is err's text without the package prefix, cut to fit a
// close frame on a UTF-8 boundary.
func closeReason(err error) string {
	r := err.Error()
	if len(r) > 11 && r[:11] == "websocket: " {
		r = r[11:]
	}
	limit := MaxControlPayload - 2
	for len(r) > limit || !utf8.ValidString(r) {
		limit--
		r = r[:min(len(r), limit)]
	}
	return r
}

// closeWith stages a close frame once and returns err, which closes the
// connection when the call ends.
func (s *session) closeWith(code int, reason string, err error) error {
	if !s.closing && s.upgraded {
		_ = s.l.ws.WriteControl(gorilla.CloseMessage, gorilla.FormatCloseMessage(code, reason), time.Time{})
	}
	s.closing = true
	return err
}

// isOperator reports whether the check in force admitted this session.
func (s *session) isOperator() bool {
	g := s.h.gate.Load()
	return s.operator != 0 && g != nil && g.epoch == s.operator
}

// operatorChanged reports whether the session was an operator's under a
// check that has since been replaced.
func (s *session) operatorChanged() bool { return s.operator != 0 && !s.isOperator() }

// writeControl stages a ping, pong or close through gorilla's write path.
func (s *session) writeControl(typ int, payload []byte) error {
	if err := s.l.ws.WriteControl(typ, payload, time.Time{}); err != nil {
		return fmt.Errorf("%w: %w", ErrInternal, err)
	}
	return nil
}

// writeText stages one text message and flushes when enough is staged.
// A message that would not fit under the high-water mark is dropped under
// the drop policy; under close, the flush that follows it fails.
func (s *session) writeText(p []byte, delivery bool) error {
	if s.wouldOverflow(len(p)) {
		if s.l.set.drop {
			s.h.n.slowDrop.Add(1)
			return nil
		}
		// Hand over what fits, so the close policy closes on the
		// message that does not rather than on a whole batch.
		if err := s.flush(); err != nil {
			return err
		}
	}
	if err := s.stage(p, delivery); err != nil {
		return err
	}
	if len(s.l.out) >= flushAt {
		return s.flush()
	}
	return nil
}

// stage frames one text message into the staging buffer. Without
// compression the frame is the header and p, appended here: the same bytes
// gorilla writes, without its copy through a pooled write buffer (and the
// allocation its pool costs per message), which a fan-out pays per
// subscriber.
func (s *session) stage(p []byte, delivery bool) error {
	l := s.l
	if l.variant == plain {
		l.out = appendServerFrame(l.out, OpText, p)
	} else if err := l.ws.WriteMessage(gorilla.TextMessage, p); err != nil {
		return fmt.Errorf("%w: %w", ErrInternal, err)
	}
	l.batch++
	if delivery {
		l.deliveries++
	}
	return nil
}
