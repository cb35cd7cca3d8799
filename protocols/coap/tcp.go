package coap

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	tcpcoder "github.com/plgd-dev/go-coap/v3/tcp/coder"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// CoAP over TCP (RFC 8323): no types, Message IDs or retransmissions (the
// stream is reliable), a length in the header, and signalling messages
// (7.xx): each side's first message is a CSM with its Max-Message-Size
// and Block-Wise-Transfer; Ping is answered with Pong; Release and Abort
// end the connection. Requests reach the same resources as over UDP, and
// notifications go out as the socket takes them.

// Errors a TCP session closes its connection with.
var (
	// ErrReleased: the peer sent Release (7.04), a graceful close by the
	// peer, so it is also protocols.ErrPeerClosed (and counted as such).
	ErrReleased = fmt.Errorf("coap: peer released the connection: %w", protocols.ErrPeerClosed)
	// ErrAborted: the peer sent Abort (7.05).
	ErrAborted = errors.New("coap: peer aborted the connection")
	// ErrPanic: the session recovered a panic of its own.
	ErrPanic = fmt.Errorf("coap: %w", protocols.ErrPanic)
)

// Signalling option numbers (RFC 8323 section 5).
const (
	optMaxMessageSize message.OptionID = 2 // CSM
	optBlockWise      message.OptionID = 4 // CSM
	optBadCSMOption   message.OptionID = 2 // Abort
)

// Open starts a session and sends the server's CSM.
func (h *Handler) Open(c protocols.Conn) (protocols.Session, error) {
	h.srv.stats.sessions.Add(1)
	s := &tcpSession{srv: h.srv, conn: c}
	s.res.setCode(codes.CSM)
	s.res.addUint(optMaxMessageSize, uint32(h.srv.cfg.TCPMaxMessage))
	s.res.addBytes(optBlockWise, nil)
	if err := s.write(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// tcpSession is one connection; its worker calls it from one goroutine.
type tcpSession struct {
	srv     *server
	conn    protocols.Conn
	w       watcher
	csm     bool // the peer's CSM has come
	waiting bool // notifications wait for the socket to take the output
	serving bool // a request (in) is being answered: a panic meanwhile owes it a 5.00

	in   message.Message
	opts [maxOptions]message.Option
	res  response
	out  []byte
	msgs []bus.Message
}

var (
	_ protocols.Session  = (*tcpSession)(nil)
	_ protocols.Notified = (*tcpSession)(nil)
	_ protocols.Writable = (*tcpSession)(nil)
	_ protocols.Drainer  = (*tcpSession)(nil)
)

// Data handles every whole message in in.
func (s *tcpSession) Data(in []byte) (consumed int, err error) {
	defer s.recoverPanic(&err)
	for consumed < len(in) && err == nil {
		var h tcpcoder.MessageHeader
		_, herr := tcpcoder.DefaultCoder.DecodeHeader(in[consumed:], &h)
		if errors.Is(herr, message.ErrShortRead) {
			return consumed, nil
		}
		if herr != nil {
			return consumed, s.abort(herr.Error())
		}
		if int64(h.MessageLength) > int64(s.srv.cfg.TCPMaxMessage) {
			return consumed, s.abort(fmt.Sprintf("message of %d bytes over our Max-Message-Size %d", h.MessageLength, s.srv.cfg.TCPMaxMessage))
		}
		if len(in)-consumed < int(h.MessageLength) {
			return consumed, nil
		}
		frame := in[consumed : consumed+int(h.MessageLength)]
		consumed += int(h.MessageLength)
		s.in = message.Message{Options: s.opts[:0]}
		if _, derr := tcpcoder.DefaultCoder.DecodeWithHeader(frame[h.Length:], h, &s.in); derr != nil {
			return consumed, s.abort(derr.Error())
		}
		err = s.handle()
	}
	return consumed, err
}

// handle answers one message.
func (s *tcpSession) handle() error {
	code := s.in.Code
	if !s.csm && code != codes.CSM {
		return s.abort("the first message must be a CSM")
	}
	switch {
	case code == codes.CSM:
		return s.onCSM()
	case code == codes.Ping:
		s.res.setCode(codes.Pong)
		return s.write(s.in.Token)
	case code == codes.Pong, code == codes.Empty: // Empty is a keepalive to ignore (RFC 8323 section 3.4)
		return nil
	case code == codes.Release:
		return ErrReleased
	case code == codes.Abort:
		return ErrAborted
	case code >= 1 && code < 32:
		s.serving = true
		x := exchange{w: &s.w, notify: s.conn.Notify, now: time.Now()}
		s.srv.serve(&x, &s.in, &s.res)
		err := s.write(s.in.Token)
		s.serving = false
		return err
	case code>>5 == 7:
		return s.abort("unknown signalling code")
	}
	return nil // a response to a request we never made
}

// onCSM takes the peer's settings (RFC 8323 section 5.3). Its
// Max-Message-Size needs no keeping: every message this server sends fits
// the base value, 1152 bytes (a block of at most 1024 and its options).
func (s *tcpSession) onCSM() error {
	for _, o := range s.in.Options {
		switch {
		case o.ID == optMaxMessageSize, o.ID == optBlockWise:
		case o.ID%2 == 1:
			s.res.setCode(codes.Abort)
			s.res.addUint(optBadCSMOption, uint32(o.ID))
			s.res.payload = []byte("unknown critical CSM option")
			_ = s.write(nil)
			return fmt.Errorf("%w: unknown critical CSM option %d", protocols.ErrMalformed, o.ID)
		}
	}
	s.csm = true
	return nil
}

// abort sends Abort (7.05) with a diagnostic and returns the reason the
// connection closes.
func (s *tcpSession) abort(why string) error {
	s.srv.stats.malformed.Add(1)
	s.res.fail(codes.Abort, why)
	_ = s.write(nil)
	return fmt.Errorf("%w: coap: %s", protocols.ErrMalformed, why)
}

// write encodes res with token and writes it.
func (s *tcpSession) write(token []byte) error {
	out, err := s.encode(s.out[:0], token)
	s.out = out
	if err != nil {
		return err
	}
	err = s.conn.Write(s.out)
	if cap(s.out) > 64<<10 {
		s.out = nil // do not keep a large buffer per idle connection
	}
	return err
}

// encode appends res with token to dst, as one message.
func (s *tcpSession) encode(dst, token []byte) ([]byte, error) {
	m := s.res.message(token)
	for {
		n, err := tcpcoder.DefaultCoder.Encode(m, dst[len(dst):cap(dst)])
		if err == nil {
			return dst[:len(dst)+n], nil
		}
		if n <= cap(dst)-len(dst) {
			return dst, fmt.Errorf("coap: encode: %w", err)
		}
		dst = slices.Grow(dst, n)
	}
}

// Notified delivers what the subscriber holds while the socket takes it.
func (s *tcpSession) Notified() (err error) {
	defer s.recoverPanic(&err)
	return s.deliver()
}

// Writable resumes deliveries that waited for the socket.
func (s *tcpSession) Writable() (err error) {
	if !s.waiting {
		return nil
	}
	defer s.recoverPanic(&err)
	s.waiting = false
	return s.deliver()
}

// deliver sends notifications a bounded batch at a time, while the output
// is empty; the rest waits in the bus (bounded by coap.queue).
func (s *tcpSession) deliver() error {
	for round := 0; s.w.sub != nil; round++ {
		if s.w.sub.Disconnected() {
			s.w.clear(s.srv)
			return nil
		}
		if s.conn.Buffered() > 0 {
			s.waiting = true
			return nil
		}
		if round == deliverRounds {
			s.conn.Notify()
			return nil
		}
		sub := s.w.sub
		batch := sub.Drain(s.msgs[:0], deliverBatch)
		s.msgs = batch.Msgs
		if batch.Dropped > 0 {
			s.srv.stats.dropped.Add(batch.Dropped)
			s.conn.CountDropped(int(min(batch.Dropped, 1<<31-1)))
		}
		for i := range batch.Msgs {
			m := &batch.Msgs[i]
			for j := range s.w.obs {
				if o := &s.w.obs[j]; o.matches(m) {
					s.srv.notification(o, m, &s.res)
					s.srv.stats.notifications.Add(1)
					if err := s.write(o.token[:o.tkl]); err != nil {
						return err
					}
				}
			}
		}
		// Each notification was encoded into the output: the recycled
		// payloads may go back (bus.Subscriber.Recycle).
		sub.Release(batch.Msgs)
		clear(s.msgs)
		s.res.payload = nil // it pointed into the last one released
		if !batch.More {
			return nil
		}
	}
	return nil
}

// Drain tells the peer the server is going: Release (RFC 8323 section 5.5).
func (s *tcpSession) Drain() error {
	s.res.setCode(codes.Release)
	_ = s.write(nil)
	return protocols.ErrShutdown
}

// Closed releases the subscriber and any upload.
func (s *tcpSession) Closed(error) { s.w.clear(s.srv) }

// recoverPanic turns a panic of this session into its close reason: the
// connection dies, told why first (tellInternal), and the worker lives.
func (s *tcpSession) recoverPanic(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %v", ErrPanic, r)
		// Logged with the stack here: the close reason carries only the
		// value, and a bug needs the place too (as private and WebSocket).
		s.srv.log.Error("session panic", "conn", s.conn.ID(), "panic", r, "stack", string(debug.Stack()))
		s.tellInternal()
	}
}

// tellInternal tells the peer, in CoAP's words, that the gateway failed
// it, so that it does not take the close for a network fault: a 5.00 to
// the request being served, if one was (s.in still holds it: its token
// points into the broken call's input, which the call has not returned),
// then an Abort (RFC 8323 section 5.6). The session writes every message
// whole as soon as it is encoded, so the stream is at a message boundary;
// what the broken call had staged (the response it was building in res,
// a message encoded in out but not written) is dropped. Both messages are
// encoded before the one write, so should that panic too (the session's
// state left broken by the first), nothing is sent and the worker closes
// the connection all the same.
func (s *tcpSession) tellInternal() {
	defer func() { _ = recover() }()
	out, serving := s.out[:0], s.serving
	s.serving = false
	var err error
	if serving {
		s.res.fail(codes.InternalServerError, "internal error")
		if out, err = s.encode(out, s.in.Token); err != nil {
			return
		}
	}
	s.res.fail(codes.Abort, "internal error")
	if out, err = s.encode(out, nil); err != nil {
		return
	}
	_ = s.conn.Write(out)
}
