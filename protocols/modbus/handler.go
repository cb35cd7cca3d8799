package modbus

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/modbus/upstream"
	"github.com/edgemux/edgemux/route/bus"
)

// Stats are a Handler's counters since New.
type Stats struct {
	Sessions   uint64 // connections handed over
	Requests   uint64 // requests answered, exceptions included
	Reads      uint64 // reads answered with data
	Writes     uint64 // writes answered and published
	Exceptions uint64 // requests answered with an exception
	Published  uint64 // bus values written by masters
	Malformed  uint64 // connections closed for a broken MBAP header
	Forwarded  uint64 // requests sent to upstream devices (gateway mode)
	// UpstreamFailed counts forwarded requests answered with 0x0A, 0x0B
	// or 0x01 because the device could not be asked or did not answer.
	UpstreamFailed uint64
	// WritesFailed counts register-map writes answered with an exception
	// because a device did not take a write they caused (writeack.go).
	WritesFailed uint64
	// Dial-in devices (dialin.go): silent peers probed, connections
	// attached to their lines, attachments that replaced an older
	// connection, answers naming no line, answers that were not a
	// response to the probe (closed and recorded as malformed).
	Probed, DialIns, DialInReplaced, DialInUnknown, DialInRefused uint64
}

// Counters lists the Stats fields under snake_case names, in a fixed order.
func (st Stats) Counters() []protocols.Counter {
	return []protocols.Counter{
		{Name: "sessions", N: st.Sessions}, {Name: "requests", N: st.Requests}, {Name: "reads", N: st.Reads}, {Name: "writes", N: st.Writes},
		{Name: "exceptions", N: st.Exceptions}, {Name: "published", N: st.Published}, {Name: "malformed", N: st.Malformed},
		{Name: "forwarded", N: st.Forwarded}, {Name: "upstream_failed", N: st.UpstreamFailed},
		{Name: "writes_failed", N: st.WritesFailed},
		{Name: "probed", N: st.Probed}, {Name: "dial_ins", N: st.DialIns}, {Name: "dial_in_replaced", N: st.DialInReplaced},
		{Name: "dial_in_unknown", N: st.DialInUnknown}, {Name: "dial_in_refused", N: st.DialInRefused},
	}
}

type counters struct {
	sessions, requests, reads, writes, exceptions, published, malformed atomic.Uint64
	forwarded, upstreamFailed, writesFailed                             atomic.Uint64
	probed, dialIns, dialInReplaced, dialInUnknown, dialInRefused       atomic.Uint64
}

// Handler serves Modbus TCP masters for the workers of one pool. It is
// safe for concurrent use; a session holds no state of its own between
// requests, only its connection.
type Handler struct {
	bus  *bus.Bus
	now  func() int64 // the bus's clock, for max_age
	log  *slog.Logger
	set  atomic.Pointer[settings] // swapped by Reload
	out  protocols.Scratch[byte]  // response buffers, held during one call
	n    counters
	up   *upstream.Set // gateway mode: devices by gateway unit id; set before serving
	dial dialInConfig  // how Probe asks a silent peer who it is (dialin.go)
}

// settings are what Reload swaps.
type settings struct {
	anyUnit bool
	units   [256]bool
	regs    *Map
	maxAge  int64 // nanoseconds; 0: values never go stale
	zero    bool  // no_value: zero
}

var _ protocols.Handler = (*Handler)(nil)

// New returns a Handler serving cfg's register map from b; cfg must have
// passed config.Validate. A nil log discards.
func New(cfg config.Modbus, b *bus.Bus, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{bus: b, now: b.Options().Now, log: log.With("component", "modbus"), dial: newDialInConfig(cfg.Upstream.DialIn)}
	h.out.Min, h.out.Max = 512, 64<<10
	h.set.Store(newSettings(cfg))
	return h
}

func newSettings(cfg config.Modbus) *settings {
	st := &settings{anyUnit: len(cfg.UnitIDs) == 0, regs: NewMap(cfg.Tags),
		maxAge: int64(cfg.MaxAge), zero: cfg.NoValue == NoValueZero}
	for _, id := range cfg.UnitIDs {
		st.units[id] = true
	}
	return st
}

// Reload applies cfg (validated) from the next request on.
func (h *Handler) Reload(cfg config.Modbus) {
	h.set.Store(newSettings(cfg))
	h.log.Debug("reloaded", "tags", len(cfg.Tags), "unit_ids", cfg.UnitIDs)
}

// Stats returns a snapshot of the counters.
func (h *Handler) Stats() Stats {
	n := &h.n
	return Stats{
		Sessions: n.sessions.Load(), Requests: n.requests.Load(), Reads: n.reads.Load(), Writes: n.writes.Load(),
		Exceptions: n.exceptions.Load(), Published: n.published.Load(), Malformed: n.malformed.Load(),
		Forwarded: n.forwarded.Load(), UpstreamFailed: n.upstreamFailed.Load(), WritesFailed: n.writesFailed.Load(),
		Probed: n.probed.Load(), DialIns: n.dialIns.Load(), DialInReplaced: n.dialInReplaced.Load(),
		DialInUnknown: n.dialInUnknown.Load(), DialInRefused: n.dialInRefused.Load(),
	}
}

// SetUpstream turns gateway mode on: requests for the gateway unit ids of
// set's devices go to them. Call it before the handler serves.
func (h *Handler) SetUpstream(set *upstream.Set) { h.up = set }

// Open starts a session.
func (h *Handler) Open(c protocols.Conn) (protocols.Session, error) {
	h.n.sessions.Add(1)
	return &session{h: h, conn: c}, nil
}

// session is one master's connection.
type session struct {
	h        *Handler
	conn     protocols.Conn
	quota    bus.Quota  // new topics its writes added to the cache (tags are reserved by the gateway: none)
	partial  bool       // the last input ended inside a request
	draining bool       // the gateway drains: close once no request is in flight
	queue    []*pending // responses owed in order while a forwarded one is outstanding (forward.go)
}

// Data answers every whole request in the input, then, while the gateway
// drains, closes once no request is left half received.
func (s *session) Data(in []byte) (int, error) {
	n, err := s.answerAll(in)
	s.partial = n < len(in)
	if err == nil && s.draining && !s.partial && len(s.queue) == 0 {
		err = protocols.ErrShutdown
	}
	return n, err
}

// answerAll answers every whole request in the input, in order, with one
// write. A broken MBAP header closes the connection: Modbus TCP has no way
// to find the next request after it. The requests before it in the same
// read are still answered first: the master is owed those responses.
func (s *session) answerAll(in []byte) (int, error) {
	h := s.h
	p := h.out.Get(0)
	defer h.out.Put(p)
	out, n := (*p)[:0], 0
	var broken error
	for n < len(in) {
		adu, k, err := ParseADU(in[n:])
		if err != nil {
			h.n.malformed.Add(1)
			broken = fmt.Errorf("%w: %w", err, protocols.ErrMalformed)
			break
		}
		if k == 0 {
			break
		}
		if dev := h.up.ForGatewayUnit(adu.Unit); dev != nil {
			s.forward(dev, adu)
		} else {
			out = s.serveLocal(out, adu) // writeack.go
		}
		n += k
	}
	*p = out
	if len(out) > 0 {
		if err := s.write(out); err != nil {
			return n, err
		}
	}
	if err := s.flush(); err != nil {
		return n, err
	}
	return n, broken
}

// write sends responses, naming a master that does not read them.
func (s *session) write(out []byte) error {
	if err := s.conn.Write(out); err != nil {
		if errors.Is(err, protocols.ErrBackpressure) {
			err = fmt.Errorf("modbus: master does not read its responses: %w", err)
		}
		return err
	}
	return nil
}

// Closed has nothing to release.
func (s *session) Closed(error) {}

// serve appends the response to one request; w, when not nil, counts the
// device writes a write causes (writeack.go).
func (h *Handler) serve(out []byte, adu ADU, q *bus.Quota, w *writeWaiter) []byte {
	h.n.requests.Add(1)
	st := h.set.Load()
	function := byte(0)
	if len(adu.PDU) > 0 {
		function = adu.PDU[0]
	}
	if !st.anyUnit && !st.units[adu.Unit] {
		h.n.exceptions.Add(1)
		return AppendException(out, adu, function, GatewayPathUnavailable)
	}
	req, exc := ParseRequest(adu.PDU)
	if exc == 0 {
		if out, exc = h.answer(out, adu, req, st, q, w); exc == 0 {
			return out
		}
	}
	h.n.exceptions.Add(1)
	return AppendException(out, adu, function, exc)
}

// answer appends the response to a valid request, or returns out as it
// was and the exception to answer with. Writes publish within q, the
// connection's quota of new topics, their device writes counted by w.
func (h *Handler) answer(out []byte, adu ADU, req Request, st *settings, q *bus.Quota, w *writeWaiter) ([]byte, byte) {
	addr, qty := int(req.Address), int(req.Quantity)
	regs := st.regs
	var data [2 * maxReadRegisters]byte
	var exc byte
	var ups []update
	switch req.Function {
	case ReadCoils, ReadDiscreteInputs, ReadHoldingRegisters, ReadInputRegisters:
		v := values{bus: h.bus, maxAge: st.maxAge, zero: st.zero}
		if v.maxAge > 0 {
			v.now = h.now()
		}
		var d []byte
		if d, exc = regs.read(&v, req.Function, addr, qty, data[:0]); exc == 0 {
			h.n.reads.Add(1)
			return AppendReadResponse(out, adu, req.Function, d), 0
		}
	case WriteSingleCoil:
		bit := byte(0)
		if req.Values[0] == 0xFF {
			bit = 1
		}
		ups, exc = regs.writeBits(addr, 1, []byte{bit})
	case WriteMultipleCoils:
		ups, exc = regs.writeBits(addr, qty, req.Values)
	case WriteSingleRegister, WriteMultipleRegisters:
		ups, exc = regs.writeRegisters(addr, qty, req.Values)
	}
	if exc != 0 {
		return out, exc
	}
	for _, u := range ups {
		// The gateway reserves every tag's topic, so the bus keeps its
		// value; a refusal (a handler without that) answers 04, never a
		// write acknowledged and then read back as something else.
		if err := w.publish(h.bus, q, u.topic, []byte(u.text)); err != nil {
			h.log.Warn("publish of a write failed", "topic", u.topic, "err", err)
			return out, writeRefused(err)
		}
		h.n.published.Add(1)
	}
	h.n.writes.Add(1)
	return AppendWriteResponse(out, adu, req), 0
}

// writeRefused is the exception for a write the bus refused. A polled
// tag's topic passes writes to its device (protocols/modbus/poll), which
// refuses a tag it cannot write (0x02), a value the tag cannot carry
// (0x03) and a write past its queue (0x06, busy); anything else is 0x04.
func writeRefused(err error) byte {
	switch {
	case errors.Is(err, bus.ErrNotWritable):
		return IllegalDataAddress
	case errors.Is(err, bus.ErrWriteValue):
		return IllegalDataValue
	case errors.Is(err, bus.ErrWriteBusy):
		return ServerDeviceBusy
	}
	return ServerDeviceFailure
}
