package modbus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/modbus/upstream"
	"github.com/edgemux/edgemux/protocols/modbus/wire"
)

// Dial-in devices. A cellular DTU in front of a PLC connects to the
// shared port and says nothing: it is a Modbus server and waits to be
// asked. When sniff.probe names the modbus pool, such a peer is handed to
// Probe at the sniff deadline; Probe sends the configured read, and the
// answer (a valid MBAP response to exactly that request) says which
// dial-in line the connection is: by the registers it read, or by the
// peer's address. The connection is then attached to that line
// (upstream.Line.Attach) and carries the line's requests, polls and
// gateway mode's, as a line's own TCP connection would.
//
// The connection stays a connection of the event loop's registry, owned
// by its worker: the line's goroutine reads and writes it through a
// connPort (dialport.go) that this session feeds and drains. So the
// registry's (fd, gen) rules, idle timeouts, drain, per-source limits and
// connection views hold for it as for any other, and no second path owns
// an fd the loop might reuse.

// Errors that end a probed connection.
var (
	// ErrProbeAnswer: the silent peer answered the probe with something
	// other than a response to it. Wraps protocols.ErrMalformed.
	ErrProbeAnswer = fmt.Errorf("modbus: not a response to the dial-in probe: %w", protocols.ErrMalformed)
	// ErrUnknownDevice: the answer names no dial-in line.
	ErrUnknownDevice = errors.New("modbus: dial-in device with an identity no line has")
	// errNoDialIn: Probe with no dial-in line configured.
	errNoDialIn = errors.New("modbus: no dial-in lines to probe for")
)

// dialInConfig is modbus.upstream.dial_in, read at start (the upstream
// section needs a restart).
type dialInConfig struct {
	unit     byte
	pdu      []byte // the probe's read request
	bySource bool
	asString bool
}

func newDialInConfig(c config.ModbusDialIn) dialInConfig {
	fc := byte(c.Probe.Function)
	if fc == 0 {
		fc = ReadHoldingRegisters
	}
	count := max(c.Probe.Count, 1)
	pdu := []byte{fc}
	pdu = binary.BigEndian.AppendUint16(pdu, uint16(c.Probe.Address))
	pdu = binary.BigEndian.AppendUint16(pdu, uint16(count))
	return dialInConfig{unit: byte(c.Probe.UnitID), pdu: pdu, bySource: c.IdentifyBy == "source", asString: c.IDFormat == "string"}
}

var _ protocols.Prober = (*Handler)(nil)

// Probe sends the dial-in probe to a peer silent at the sniff deadline;
// the session it returns reads the answer.
func (h *Handler) Probe(c protocols.Conn) (protocols.Session, error) {
	if !h.up.HasDialIn() {
		return nil, errNoDialIn
	}
	h.n.probed.Add(1)
	// Any transaction id will do: the peer has been asked nothing else.
	// Taking it from the connection id makes a reply meant for another
	// connection (a DTU confused about which socket is which) fail.
	s := &dialInSession{h: h, conn: c, tid: uint16(c.ID()>>32) ^ uint16(c.ID())}
	var buf [wire.MaxMBAP]byte
	if err := c.Write(wire.AppendMBAP(buf[:0], s.tid, h.dial.unit, h.dial.pdu)); err != nil {
		return nil, err
	}
	return s, nil
}

// dialInSession is a probed connection: first waiting for the probe's
// answer, then, attached to its line, the line's connection to its device.
type dialInSession struct {
	h    *Handler
	conn protocols.Conn
	tid  uint16
	line *upstream.Line
	port *connPort // nil until the answer identified the device
}

var (
	_ protocols.Notified = (*dialInSession)(nil)
	_ protocols.Session  = (*dialInSession)(nil)
)

// Data reads the probe's answer, then passes the device's bytes to its line.
func (s *dialInSession) Data(in []byte) (int, error) {
	if s.port != nil {
		return s.port.feed(in)
	}
	tid, unit, resp, n, err := wire.ParseMBAP(in)
	if err == nil && n == 0 {
		return 0, nil // the rest of the answer is still on its way
	}
	if err != nil || tid != s.tid || unit != s.h.dial.unit || wire.CheckResponse(s.h.dial.pdu, resp) != nil || resp[0]&0x80 != 0 {
		s.h.n.dialInRefused.Add(1)
		return 0, ErrProbeAnswer
	}
	id := s.identity(resp[2:])
	line := s.h.up.DialInLine(id)
	if line == nil {
		s.h.n.dialInUnknown.Add(1)
		s.h.log.Warn("dial-in device unknown", "identity", id, "peer", s.conn.Peer().String())
		return 0, fmt.Errorf("%w: %q", ErrUnknownDevice, id)
	}
	port := newConnPort(s.conn)
	replaced, err := line.Attach(port, s.conn.Peer().String())
	if err != nil {
		return 0, err
	}
	s.line, s.port = line, port
	s.h.n.dialIns.Add(1)
	if replaced {
		s.h.n.dialInReplaced.Add(1)
	}
	return n, nil
}

// identity is what names the device: its source address, or the probe's
// registers as one unsigned number or as text.
func (s *dialInSession) identity(regs []byte) string {
	switch {
	case s.h.dial.bySource:
		return s.conn.Peer().Addr().Unmap().String()
	case s.h.dial.asString:
		return string(bytes.TrimRight(regs, "\x00 "))
	}
	var n uint64
	for _, b := range regs {
		n = n<<8 | uint64(b)
	}
	return strconv.FormatUint(n, 10)
}

// Notified writes what the line has written to the device, and closes
// the connection when the line let go of it.
func (s *dialInSession) Notified() error {
	if s.port == nil {
		return nil
	}
	return s.port.drain()
}

// Closed tells the line its device went away.
func (s *dialInSession) Closed(error) {
	if s.port != nil {
		s.port.gone()
		s.line.Detach(s.port)
	}
}
