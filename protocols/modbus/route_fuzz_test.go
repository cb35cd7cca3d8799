package modbus

import (
	"encoding/binary"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/modbus/upstream"
	"github.com/edgemux/edgemux/protocols/modbus/wire"
	"github.com/edgemux/edgemux/route/bus"
)

// The gateway's request routing, fuzzed: each request a master sends is
// answered by the register map (unit ids 1 and 2), forwarded to an
// upstream device (gateway units 11: a device that answers, 12: one that
// never does, 13: one that is not connected) or refused (any other unit:
// 0x0A). Whatever the input, cut wherever, every whole request gets
// exactly one response, in order, with its transaction id and unit, a
// response to its function or an exception from the set the gateway
// answers with; nothing panics. A broken header ends the stream: the
// requests before it are answered as far as the connection lasts
// (forwarded answers still owed when it closes are lost with it).

// routeExceptions are the exception codes a master may get: the register
// map's, and gateway mode's 0x0A and 0x0B. The fuzz devices answer within
// this set too, so a code outside it is the gateway's own doing.
var routeExceptions = map[byte]bool{IllegalFunction: true, IllegalDataAddress: true, IllegalDataValue: true,
	ServerDeviceFailure: true, GatewayPathUnavailable: true, GatewayTargetFailed: true}

// fuzzDevice is an upstream device in memory, an upstream.Port: each
// request written is answered at once (reads with zeros, writes with
// their echo, other functions 0x01), or, mute, never.
type fuzzDevice struct {
	mute     bool
	mu       sync.Mutex
	in       []byte
	deadline time.Time
	closed   bool
}

func (d *fuzzDevice) Write(p []byte) (int, error) {
	tid, unit, pdu, n, err := wire.ParseMBAP(p)
	if err != nil || n != len(p) {
		return 0, err // the line writes whole frames
	}
	if d.mute {
		return len(p), nil
	}
	d.mu.Lock()
	d.in = wire.AppendMBAP(d.in, tid, unit, fuzzAnswer(pdu))
	d.mu.Unlock()
	return len(p), nil
}

func fuzzAnswer(pdu []byte) []byte {
	fc := pdu[0]
	switch {
	case len(pdu) != 5 && fc <= 6:
		return []byte{fc | 0x80, IllegalDataValue}
	case fc == ReadCoils || fc == ReadDiscreteInputs:
		n := (int(binary.BigEndian.Uint16(pdu[3:])) + 7) / 8
		if n == 0 || n > 250 {
			return []byte{fc | 0x80, IllegalDataValue}
		}
		return append([]byte{fc, byte(n)}, make([]byte, n)...)
	case fc == ReadHoldingRegisters || fc == ReadInputRegisters:
		n := int(binary.BigEndian.Uint16(pdu[3:]))
		if n == 0 || n > 125 {
			return []byte{fc | 0x80, IllegalDataValue}
		}
		return append([]byte{fc, byte(2 * n)}, make([]byte, 2*n)...)
	case fc == WriteSingleCoil || fc == WriteSingleRegister:
		return append([]byte(nil), pdu...)
	case (fc == WriteMultipleCoils || fc == WriteMultipleRegisters) && len(pdu) >= 5:
		return append([]byte(nil), pdu[:5]...)
	}
	return []byte{fc | 0x80, IllegalFunction}
}

func (d *fuzzDevice) Read(p []byte) (int, error) {
	d.mu.Lock()
	n := copy(p, d.in)
	d.in = d.in[:copy(d.in, d.in[n:])]
	deadline, closed := d.deadline, d.closed
	d.mu.Unlock()
	switch {
	case n > 0:
		return n, nil
	case closed:
		return 0, os.ErrClosed
	}
	time.Sleep(time.Until(deadline)) // a mute device: the line's timeout
	return 0, os.ErrDeadlineExceeded
}

func (d *fuzzDevice) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	d.deadline = t
	d.mu.Unlock()
	return nil
}

func (d *fuzzDevice) SetWriteDeadline(time.Time) error { return nil }

func (d *fuzzDevice) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return nil
}

// notifyConn is a protocols.Conn that collects what the session writes
// and signals Notify, so the test can play the worker's part.
type notifyConn struct {
	out    []byte
	closed bool
	notify chan struct{}
}

func (c *notifyConn) ID() uint64               { return 1 }
func (c *notifyConn) Peer() netip.AddrPort     { return netip.AddrPort{} }
func (c *notifyConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (c *notifyConn) Buffered() int            { return 0 }
func (c *notifyConn) SetTimer(time.Duration)   {}
func (c *notifyConn) CountDropped(int)         {}
func (c *notifyConn) Close(error)              { c.closed = true }
func (c *notifyConn) Write(p []byte) error     { c.out = append(c.out, p...); return nil }
func (c *notifyConn) Notify() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// routeSet is the upstream side of FuzzRouting: three dial-in lines,
// two with a device in memory attached.
func routeSet() *upstream.Set {
	dev := func(name, line string, unit, gw int) config.ModbusDevice {
		return config.ModbusDevice{Name: name, Line: line, UnitID: unit, GatewayUnit: gw, Timeout: time.Millisecond, ProbeEvery: time.Millisecond}
	}
	set := upstream.Build(config.ModbusUpstream{
		Lines: []config.ModbusLine{{Name: "up", Kind: "dial-in", Identity: "1"}, {Name: "mute", Kind: "dial-in", Identity: "2"},
			{Name: "away", Kind: "dial-in", Identity: "3"}},
		Devices: []config.ModbusDevice{dev("up", "up", 5, 11), dev("mute", "mute", 6, 12), dev("away", "away", 7, 13)},
	}, nil)
	set.Start()
	set.DialInLine("1").Attach(&fuzzDevice{}, "fuzz")
	set.DialInLine("2").Attach(&fuzzDevice{mute: true}, "fuzz")
	return set
}

func FuzzRouting(f *testing.F) {
	f.Add(adu(1, 1, 0x03, 0, 100, 0, 2), uint16(0))
	f.Add(adu(2, 11, 0x03, 0, 0, 0, 4), uint16(5))
	f.Add(append(append(adu(3, 11, 0x01, 0, 0, 0, 9), adu(4, 1, 0x04, 0, 0, 0, 1)...), adu(5, 13, 0x06, 0, 1, 0, 7)...), uint16(13))
	f.Add(append(append(adu(6, 12, 0x03, 0, 0, 0, 1), adu(7, 2, 0x01, 0, 0, 0, 2)...), adu(8, 11, 0x10, 0, 0, 0, 1, 2, 0, 9)...), uint16(20))
	f.Add(append(adu(9, 99, 0x03, 0, 0, 0, 1), adu(10, 11, 0x2B, 0x0E, 1, 0)...), uint16(1))
	// A broken header after a forwarded request; a request cut short.
	f.Add(append(adu(11, 11, 0x03, 0, 0, 0, 1), 0, 12, 0, 7, 0, 6), uint16(0))
	f.Add(append(adu(12, 11, 0x05, 0, 3, 0xFF, 0), adu(13, 11, 0x03, 0, 0)[:9]...), uint16(3))
	// Past maxPending forwarded requests at once, local ones between.
	var many []byte
	for i := range 70 {
		many = append(many, adu(uint16(i), []byte{11, 12, 13, 1}[i%4], 0x03, 0, 0, 0, 1)...)
	}
	f.Add(many, uint16(100))
	b := bus.New(bus.Options{})
	mustPublish(f, b, "plant/temp", "4000")
	mustPublish(f, b, "plant/setpoint", "1.5")
	cfg := plantMap
	cfg.UnitIDs = []int{1, 2}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		set := routeSet()
		defer set.Close()
		h := New(cfg, b, nil)
		h.SetUpstream(set)
		c := &notifyConn{notify: make(chan struct{}, 1)}
		s, _ := h.Open(c)
		n, broken := feedRouting(s, in, int(cut))
		reqs := wholeRequests(t, in[:n])
		sess := s.(*session)
		for !broken && len(sess.queue) > 0 { // the worker's part: Notified after Notify
			select {
			case <-c.notify:
			case <-time.After(safetyNet):
				t.Fatalf("%d answers still owed", len(sess.queue))
			}
			if err := sess.Notified(); err != nil {
				t.Fatal(err)
			}
		}
		got := checkResponses(t, c.out, reqs)
		if !broken && got != len(reqs) {
			t.Fatalf("%d requests, %d responses", len(reqs), got)
		}
	})
}

// feedRouting gives the session the input in two reads, cut at cut, as a
// worker does: what a call leaves unconsumed comes again with the rest.
// It returns what was consumed and whether the session refused the input.
func feedRouting(s protocols.Session, in []byte, cut int) (int, bool) {
	cut = min(cut, len(in))
	consumed := 0
	for _, end := range []int{cut, len(in)} {
		if end == consumed {
			continue
		}
		k, err := s.Data(in[consumed:end])
		consumed += k
		if err != nil {
			return consumed, true
		}
	}
	return consumed, false
}

// wholeRequests splits consumed input into its requests; consumed bytes
// that are not whole requests fail.
func wholeRequests(t *testing.T, p []byte) []ADU {
	var reqs []ADU
	for len(p) > 0 {
		a, k, err := ParseADU(p)
		if err != nil || k == 0 {
			t.Fatalf("consumed bytes that are not whole requests: %v", err)
		}
		reqs, p = append(reqs, a), p[k:]
	}
	return reqs
}

// checkResponses checks that out is, in order, one response to each of
// the first requests, and returns how many.
func checkResponses(t *testing.T, out []byte, reqs []ADU) int {
	i := 0
	for ; len(out) > 0; i++ {
		tid, unit, pdu, k, err := wire.ParseMBAP(out)
		switch {
		case err != nil || k == 0:
			t.Fatalf("response %d is not a whole MBAP frame (%v): % x", i, err, out)
		case i >= len(reqs):
			t.Fatalf("response %d answers no request: % x", i, out[:k])
		case tid != reqs[i].Transaction || unit != reqs[i].Unit:
			t.Fatalf("response %d has transaction %d unit %d, request %d unit %d", i, tid, unit, reqs[i].Transaction, reqs[i].Unit)
		}
		fc := byte(0)
		if len(reqs[i].PDU) > 0 {
			fc = reqs[i].PDU[0]
		}
		switch {
		case pdu[0] == fc|0x80 && len(pdu) == 2 && routeExceptions[pdu[1]]:
		case pdu[0] == fc|0x80:
			t.Fatalf("response %d: exception % x, not one the gateway answers", i, pdu)
		case pdu[0] != fc:
			t.Fatalf("response %d: function %#x for request %#x", i, pdu[0], fc)
		}
		out = out[k:]
	}
	return i
}
