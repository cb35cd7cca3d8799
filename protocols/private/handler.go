package private

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// Source is the name the handler publishes under (bus.Message.Src).
const Source = "private"

// Session errors: the reasons a session gives its worker for closing.
var (
	// ErrPeerError is returned when the client sends an ERROR frame.
	ErrPeerError = errors.New("private: peer sent ERROR")
	// ErrPanic is returned when the session recovered a panic of its own.
	ErrPanic = fmt.Errorf("private: %w", protocols.ErrPanic)
)

// flushAt bounds the output a session builds before handing it to
// Conn.Write, so a burst of pipelined requests or deliveries never grows
// one buffer without limit.
const flushAt = 64 << 10

// Stats are a Handler's counters since New.
type Stats struct {
	Sessions      uint64 // sessions opened
	Published     uint64 // PUBs accepted by the bus
	Delivered     uint64 // deliveries written to clients
	Encoded       uint64 // PUB frames encoded for deliveries: once per live message, shared by its subscribers
	Dropped       uint64 // deliveries the bus dropped (a full queue), told to clients with DROPPED
	Rejected      uint64 // requests failed with a recoverable code (CACHE_FULL and TOPIC_QUOTA among them)
	Violations    uint64 // connections closed for protocol violations
	SlowConsumers uint64 // connections closed because they did not read
}

// Counters lists the Stats fields under snake_case names, in a fixed order.
func (st Stats) Counters() []protocols.Counter {
	return []protocols.Counter{
		{Name: "sessions", N: st.Sessions}, {Name: "published", N: st.Published}, {Name: "delivered", N: st.Delivered},
		{Name: "dropped", N: st.Dropped}, {Name: "rejected", N: st.Rejected}, {Name: "violations", N: st.Violations},
		{Name: "slow_consumers", N: st.SlowConsumers}, {Name: "encoded", N: st.Encoded},
	}
}

// Handler serves the private protocol on the connections of one pool. It
// is safe for concurrent use; each connection's state is its session.
type Handler struct {
	cfg config.Private
	bus *bus.Bus
	log *slog.Logger

	out        protocols.Scratch[byte] // output buffers, only held during a call
	deliveries deliverScratches        // deliver's buffers, only held during a call

	sessions, dropped                   atomic.Uint64
	rejected, violations, slowConsumers atomic.Uint64

	// Counted per message, by sessions on every core at once.
	published, delivered, encoded protocols.StripedCounter
}

var _ protocols.Handler = (*Handler)(nil)

// New returns a Handler publishing into and subscribing from b. Zero cfg
// fields take the package defaults; a nil log discards. cfg.HelloWithin is
// not enforced here: the gateway's idle timer closes a connection that
// stays silent, and any first frame but HELLO is rejected by the session.
func New(cfg config.Private, b *bus.Bus, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: withDefaults(cfg), bus: b, log: log.With("component", "private")}
	// Keep only modest buffers, so one burst does not pin memory.
	h.out.Min, h.out.Max = 512, 2*flushAt
	return h
}

// Config returns the configuration in effect, defaults filled in.
func (h *Handler) Config() config.Private { return h.cfg }

// Stats returns a snapshot of the counters.
func (h *Handler) Stats() Stats {
	return Stats{
		Sessions:      h.sessions.Load(),
		Published:     h.published.Load(),
		Delivered:     h.delivered.Load(),
		Encoded:       h.encoded.Load(),
		Dropped:       h.dropped.Load(),
		Rejected:      h.rejected.Load(),
		Violations:    h.violations.Load(),
		SlowConsumers: h.slowConsumers.Load(),
	}
}

// Open starts a session; it holds no buffers and no subscriber until it
// needs them.
func (h *Handler) Open(c protocols.Conn) (protocols.Session, error) {
	n := h.sessions.Add(1)
	if h.cfg.HelloWithin > 0 {
		c.SetTimer(h.cfg.HelloWithin)
	}
	return &session{h: h, conn: c, stripe: protocols.StripeFor(n)}, nil
}

// Timer fires hello_within after Open: a device that has not completed its
// HELLO by then (the sniffer saw a HELLO header, but a large one may never
// finish arriving) gets an ERROR and is closed.
func (s *session) Timer() error {
	if s.hello {
		return nil
	}
	out, err := s.fatal(nil, CodeNotHelloFirst, ErrHelloTimeout)
	s.conn.Write(out)
	return err
}

// session is one connection's state. The owning worker calls it from one
// goroutine at a time, so it needs no locks.
//
// Every connection holds one for life, so its fields are ordered to pack
// it into 80 bytes (88 with the bools beside conn, which the allocator
// rounds to 96; TestSessionSize holds it there).
type session struct {
	h       *Handler
	conn    protocols.Conn
	device  string          // from HELLO, for logs
	sub     *bus.Subscriber // created on the first SUB
	pub     *publisher      // made at the first PUB; nil before
	quota   bus.Quota       // new topics this connection added to the cache
	hello   bool
	waiting bool             // deliveries wait for the output to drain (Writable)
	stripe  protocols.Stripe // this session's cell of the handler's per-message counters
}

// publisher is what a session keeps once it publishes, made at its first
// PUB: a session that never publishes stays within 64 bytes, a size class
// of its own (TestSessionSize), and one that does pays for this once.
type publisher struct {
	route bus.Route // where the last PUB went (bus.PublishRoute)
	held  heldAcks  // ACKs waiting for device writes (writeack.go)
}

// publisher returns the session's publisher, made at the first call.
func (s *session) publisher() *publisher {
	if s.pub == nil {
		s.pub = new(publisher)
	}
	return s.pub
}

var (
	_ protocols.Session  = (*session)(nil)
	_ protocols.Notified = (*session)(nil)
	_ protocols.Writable = (*session)(nil)
	_ protocols.Timed    = (*session)(nil)
)

// ErrHelloTimeout closes a connection whose HELLO did not arrive within
// hello_within.
var ErrHelloTimeout = errors.New("private: no HELLO within hello_within")

// Data handles every whole frame in in and writes the answers in one
// batch.
func (s *session) Data(in []byte) (consumed int, err error) {
	defer s.recoverPanic(&err)
	buf := s.h.out.Get(0)
	defer s.h.out.Put(buf)
	out := *buf
	for consumed < len(in) && err == nil {
		f, n, perr := ParseFrame(in[consumed:], s.h.cfg.MaxFrame)
		if perr != nil {
			out, err = s.fatal(out, CodeOf(perr), perr)
			break
		}
		if n == 0 {
			break
		}
		consumed += n
		out, err = s.handle(out, f)
		if err == nil && len(out) >= flushAt {
			out, err = s.flush(out)
		}
	}
	*buf = out // keep a grown buffer for the pool
	if _, werr := s.flush(out); werr != nil && err == nil {
		err = werr
	}
	return consumed, err
}

// handle answers one frame. A returned error closes the connection; out
// then already holds the ERROR frame that says why.
func (s *session) handle(out []byte, f Frame) ([]byte, error) {
	if !s.hello && f.Type != TypeHello {
		return s.fatal(out, CodeNotHelloFirst, nil)
	}
	switch f.Type {
	case TypeHello:
		return s.onHello(out, f.Payload)
	case TypePub:
		m, err := DecodePub(f.Payload)
		if err != nil {
			return s.fatal(out, CodeMalformed, err)
		}
		return s.onPub(out, m)
	case TypeSub, TypeUnsub:
		m, err := DecodeSub(f.Payload)
		if err != nil {
			return s.fatal(out, CodeMalformed, err)
		}
		return s.onSub(out, f.Type, m)
	case TypePing:
		token, err := DecodePing(f.Payload)
		if err != nil {
			return s.fatal(out, CodeMalformed, err)
		}
		return AppendFrame(out, TypePong, token), nil
	case TypePong:
		return out, nil
	case TypeError:
		return out, s.onPeerError(f.Payload)
	default: // ACK: the server asks nothing a client could acknowledge
		return s.fatal(out, CodeUnexpectedType, nil)
	}
}

func (s *session) onHello(out []byte, payload []byte) ([]byte, error) {
	if s.hello {
		return s.fatal(out, CodeHelloTwice, nil)
	}
	m, err := DecodeHello(payload)
	if err != nil {
		return s.fatal(out, CodeMalformed, err)
	}
	s.hello = true
	s.conn.SetTimer(0)
	s.device = string(m.DeviceID)
	if s.h.log.Enabled(context.Background(), slog.LevelDebug) {
		s.h.log.Debug("hello", "conn", s.conn.ID(), "peer", s.conn.Peer(), "device", s.device, "keepalive", m.Keepalive)
	}
	return AppendAck(out, Ack{}), nil
}

func (s *session) onPub(out []byte, m Pub) ([]byte, error) {
	if len(m.Topic) > s.h.cfg.MaxTopic {
		return s.reject(out, m.MsgID, CodeTopicTooLong, "")
	}
	if protocols.GatewayTopic(m.Topic) {
		return s.reject(out, m.MsgID, CodeReservedTopic, "")
	}
	if m.MsgID != 0 && s.h.bus.Claimed(string(m.Topic)) {
		return s.publishAcked(out, string(m.Topic), m) // a device's write: writeack.go
	}
	// The bus copies the payload, and the topic only when it is new to
	// its cache: a known topic is published under the cache's string. A
	// device publishes to the same few topics again and again: its Route
	// spares the bus the lookups of the topic it used last.
	err := s.h.bus.PublishRoute(&s.publisher().route, &s.quota, m.Topic, m.Data, Source)
	if err != nil {
		return s.reject(out, m.MsgID, pubCode(err), err.Error())
	}
	s.h.published.Add(s.stripe, 1)
	if m.MsgID != 0 {
		out = AppendAck(out, Ack{MsgID: m.MsgID})
	}
	return out, nil
}

// pubCode is the code for a PUB the bus refused.
func pubCode(err error) Code {
	switch {
	case errors.Is(err, bus.ErrInvalidTopic):
		return CodeBadTopic
	case errors.Is(err, bus.ErrPayloadTooLarge):
		return CodePayloadTooLarge
	case errors.Is(err, bus.ErrCacheFull):
		return CodeCacheFull
	case errors.Is(err, bus.ErrTopicQuota):
		return CodeTopicQuota
	case errors.Is(err, bus.ErrNotWritable):
		return CodeNotWritable
	case errors.Is(err, bus.ErrWriteValue):
		return CodeBadValue
	case errors.Is(err, bus.ErrWriteBusy):
		return CodeBusy
	}
	return CodeInternal
}

func (s *session) onSub(out []byte, typ Type, m Sub) ([]byte, error) {
	if len(m.Filter) > s.h.cfg.MaxTopic {
		return s.reject(out, m.MsgID, CodeTopicTooLong, "")
	}
	if typ == TypeSub && protocols.GatewayTopic(m.Filter) {
		// The gateway's state ("$SYS/...") is for operators, and a device
		// has no operator credentials to show.
		return s.reject(out, m.MsgID, CodeReservedTopic, "")
	}
	filter := string(m.Filter)
	var err error
	if typ == TypeSub {
		err = s.subscribe(filter)
	} else {
		err = s.unsubscribe(filter)
	}
	code := subCode(err)
	switch {
	case code == CodeOK:
		if m.MsgID != 0 {
			out = AppendAck(out, Ack{MsgID: m.MsgID})
		}
		return out, nil
	case code.Fatal():
		return s.fatal(out, code, err)
	}
	return s.reject(out, m.MsgID, code, err.Error())
}

// subscribe creates the subscriber on first use and enforces MaxSubs,
// which is per connection (the bus's own filter limit is bus-wide).
func (s *session) subscribe(filter string) error {
	if s.sub == nil {
		sub, err := s.h.bus.NewSubscriber(s.conn.Notify)
		if err != nil {
			return err
		}
		sub.SetQueue(s.h.cfg.Queue) // private.queue, not bus.queue
		sub.Recycle()               // deliver copies each batch into frames, then Releases it
		s.sub = sub
	}
	if held := s.sub.Filters(); len(held) >= s.h.cfg.MaxSubs && !contains(held, filter) {
		return fmt.Errorf("%w: limit %d", CodeTooManySubs, s.h.cfg.MaxSubs)
	}
	return s.sub.Subscribe(filter)
}

func (s *session) unsubscribe(filter string) error {
	if s.sub == nil { // nothing held; still tell a bad filter apart
		return bus.ValidFilter(filter)
	}
	return s.sub.Unsubscribe(filter)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// subCode maps a subscribe or unsubscribe error to its code. bus.ErrClosed
// means the bus cut the subscriber off: its queue overflowed.
func subCode(err error) Code {
	var c Code
	switch {
	case err == nil:
		return CodeOK
	case errors.As(err, &c):
		return c
	case errors.Is(err, bus.ErrInvalidFilter):
		return CodeBadFilter
	case errors.Is(err, bus.ErrTooManyFilters):
		return CodeTooManySubs
	case errors.Is(err, bus.ErrTooManySubscribers):
		return CodeBusy
	case errors.Is(err, bus.ErrClosed):
		return CodeSlowConsumer
	}
	return CodeInternal
}

// reject fails one request and keeps the connection: an ACK with the code
// when the client asked for one, an ERROR frame otherwise.
func (s *session) reject(out []byte, msgID uint32, code Code, detail string) ([]byte, error) {
	s.h.rejected.Add(1)
	if msgID != 0 {
		return AppendAck(out, Ack{MsgID: msgID, Status: code}), nil
	}
	if detail == "" {
		detail = code.Text()
	}
	return AppendError(out, code, detail), nil
}

// fatal appends the ERROR frame that ends the connection and returns the
// reason: protocol violations wrap protocols.ErrMalformed so the worker
// records the peer with the quarantine book. cause, when given, is the
// detail (a codec or bus error) and becomes the ERROR text.
func (s *session) fatal(out []byte, code Code, cause error) ([]byte, error) {
	if cause == nil {
		cause = code
	}
	out = AppendError(out, code, cause.Error())
	switch {
	case code.Violation():
		s.h.violations.Add(1)
		return out, fmt.Errorf("%w: %w", protocols.ErrMalformed, cause)
	case code == CodeSlowConsumer:
		s.h.slowConsumers.Add(1)
	}
	if errors.Is(cause, code) {
		return out, cause
	}
	return out, fmt.Errorf("%w: %w", code, cause)
}

func (s *session) onPeerError(payload []byte) error {
	m, err := DecodeError(payload)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPeerError, err)
	}
	if s.h.log.Enabled(context.Background(), slog.LevelDebug) {
		s.h.log.Debug("peer error", "conn", s.conn.ID(), "device", s.device, "code", m.Code, "text", string(m.Text))
	}
	return fmt.Errorf("%w: code %d", ErrPeerError, m.Code)
}

// flush writes out and returns it emptied. When the peer does not read
// (ErrBackpressure) it sends a SLOW_CONSUMER ERROR if even that fits, and
// returns the slow-consumer reason.
func (s *session) flush(out []byte) ([]byte, error) {
	if len(out) == 0 {
		return out, nil
	}
	return out[:0], s.flushed(s.conn.Write(out))
}

// flushed is what a write's error means for the session: past the
// high-water mark, a SLOW_CONSUMER error to the client and the end.
func (s *session) flushed(err error) error {
	if errors.Is(err, protocols.ErrBackpressure) {
		s.h.slowConsumers.Add(1)
		var notice [HeaderLen + 4 + 32]byte
		_ = s.conn.Write(AppendError(notice[:0], CodeSlowConsumer, CodeSlowConsumer.Text()))
		return fmt.Errorf("%w: %w", CodeSlowConsumer, err)
	}
	return err
}

// Closed releases the subscriber.
func (s *session) Closed(reason error) {
	if s.sub != nil {
		s.sub.Close()
		s.sub = nil
	}
	if s.h.log.Enabled(context.Background(), slog.LevelDebug) {
		s.h.log.Debug("closed", "conn", s.conn.ID(), "device", s.device, "reason", reason)
	}
}

// recoverPanic turns a panic of this session into its close reason: the
// connection dies, told why (tellInternal), and the worker lives.
func (s *session) recoverPanic(err *error) {
	if r := recover(); r != nil {
		s.h.log.Error("session panic", "conn", s.conn.ID(), "device", s.device, "panic", r, "stack", string(debug.Stack()))
		*err = fmt.Errorf("%w: %v", ErrPanic, r)
		s.tellInternal()
	}
}

// tellInternal tells the client, in the protocol's own words, that the
// gateway failed it: an ERROR frame, internal error, before the worker
// closes the connection for the panic. Output is written in whole frames,
// so the stream is at a frame boundary here. Should the connection itself
// panic again, the worker is left to close it.
func (s *session) tellInternal() {
	defer func() { _ = recover() }()
	_ = s.conn.Write(AppendError(nil, CodeInternal, CodeInternal.Text()))
}
