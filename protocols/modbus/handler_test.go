package modbus

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goburrow "github.com/goburrow/modbus"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// safetyNet bounds every wait so a broken test fails instead of hanging.
const safetyNet = 30 * time.Second

// pipeConn is a protocols.Conn over a real socket: what the session
// writes goes to the master.
type pipeConn struct{ nc net.Conn }

func (c *pipeConn) ID() uint64               { return 1 }
func (c *pipeConn) Peer() netip.AddrPort     { return netip.MustParseAddrPort("127.0.0.1:1") }
func (c *pipeConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (c *pipeConn) Buffered() int            { return 0 }
func (c *pipeConn) SetTimer(time.Duration)   {}
func (c *pipeConn) Notify()                  {}
func (c *pipeConn) CountDropped(int)         {}
func (c *pipeConn) Close(error)              { c.nc.Close() }
func (c *pipeConn) Write(p []byte) error     { _, err := c.nc.Write(p); return err }

// serve runs h on a loopback listener, one goroutine per connection
// standing in for the worker that owns it, and returns its address and a
// channel with each connection's close reason.
func serve(t *testing.T, h *Handler) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reasons := make(chan error, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				reasons <- work(h, nc)
			}()
		}
	}()
	return ln.Addr().String(), reasons
}

// work is a worker for one connection: it keeps unconsumed input and
// hands the session everything it has, as the gateway's worker does.
func work(h *Handler, nc net.Conn) error {
	c := &pipeConn{nc: nc}
	sess, _ := h.Open(c)
	var pending []byte
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		if err != nil {
			sess.Closed(err)
			return nil
		}
		pending = append(pending, buf[:n]...)
		k, err := sess.Data(pending)
		if err != nil {
			c.Close(err)
			sess.Closed(err)
			return err
		}
		pending = pending[k:]
	}
}

// plantMap is the register map the tests use.
var plantMap = config.Modbus{Tags: []config.ModbusTag{
	{Topic: "plant/temp", Table: "input", Address: 0, Type: "int16", Scale: 10},
	{Topic: "plant/flow", Table: "input", Address: 1, Type: "uint16"},
	{Topic: "plant/counter", Table: "holding", Address: 10, Type: "uint32"},
	{Topic: "plant/setpoint", Table: "holding", Address: 100, Type: "float32", Writable: true},
	{Topic: "plant/limit", Table: "holding", Address: 102, Type: "int16", Writable: true, Scale: 100},
	{Topic: "plant/pump", Table: "coil", Address: 0, Type: "bool", Writable: true},
	{Topic: "plant/fan", Table: "coil", Address: 1, Type: "bool", Writable: true},
	{Topic: "plant/alarm", Table: "discrete", Address: 5, Type: "bool"},
}}

func master(t *testing.T, addr string, unit byte) goburrow.Client {
	t.Helper()
	h := goburrow.NewTCPClientHandler(addr)
	h.SlaveId, h.Timeout = unit, safetyNet
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return goburrow.NewClient(h)
}

// exception is the Modbus exception code in err, or 0.
func exception(err error) byte {
	var me *goburrow.ModbusError
	if errors.As(err, &me) {
		return me.ExceptionCode
	}
	return 0
}

func mustPublish(t testing.TB, b *bus.Bus, topic, value string) {
	t.Helper()
	if err := b.Publish(topic, []byte(value), "private"); err != nil {
		t.Fatal(err)
	}
}

// TestMasterReadsAndWrites drives the handler with goburrow/modbus, a
// real master: values other protocols published are read in every table
// and type, writes reach the bus, and what the map does not allow gets
// the protocol's exception, on a connection that stays usable.
func TestMasterReadsAndWrites(t *testing.T) {
	b := bus.New(bus.Options{})
	h := New(plantMap, b, nil)
	addr, _ := serve(t, h)
	m := master(t, addr, 1)
	mustPublish(t, b, "plant/temp", "-21.7")
	mustPublish(t, b, "plant/flow", "42")
	mustPublish(t, b, "plant/counter", "70000")
	mustPublish(t, b, "plant/alarm", "on")

	reads := []struct {
		name string
		read func() ([]byte, error)
		want []byte
	}{
		{"int16 x10 and uint16", func() ([]byte, error) { return m.ReadInputRegisters(0, 2) }, []byte{0xFF, 0x27, 0, 42}}, // -217
		{"uint32, high word first", func() ([]byte, error) { return m.ReadHoldingRegisters(10, 2) }, []byte{0, 1, 0x11, 0x70}},
		{"low word of a uint32", func() ([]byte, error) { return m.ReadHoldingRegisters(11, 1) }, []byte{0x11, 0x70}},
		{"discrete input on", func() ([]byte, error) { return m.ReadDiscreteInputs(5, 1) }, []byte{1}},
	}
	for _, r := range reads {
		got, err := r.read()
		if err != nil || string(got) != string(r.want) {
			t.Errorf("%s: % x, %v; want % x", r.name, got, err, r.want)
		}
	}

	if _, err := m.ReadHoldingRegisters(100, 3); exception(err) != GatewayTargetFailed {
		t.Errorf("tags never published: %v, want exception 0x0B", err)
	}
	var setpoint [4]byte
	binary.BigEndian.PutUint32(setpoint[:], math.Float32bits(22.5))
	if _, err := m.WriteMultipleRegisters(100, 2, setpoint[:]); err != nil {
		t.Fatalf("write float32: %v", err)
	}
	if _, err := m.WriteSingleRegister(102, uint16(0xFFFF&-150)); err != nil { // -1.5 at scale 100
		t.Fatalf("write int16: %v", err)
	}
	if _, err := m.WriteMultipleCoils(0, 2, []byte{0b10}); err != nil { // pump off, fan on
		t.Fatalf("write coils: %v", err)
	}
	for topic, want := range map[string]string{"plant/setpoint": "22.5", "plant/limit": "-1.5", "plant/pump": "false", "plant/fan": "true"} {
		if m, ok := b.Get(topic); !ok || string(m.Payload) != want || m.Src != Source {
			t.Errorf("%s on the bus: %q from %q, want %q from modbus", topic, m.Payload, m.Src, want)
		}
	}
	if got, err := m.ReadHoldingRegisters(100, 3); err != nil || string(got) != string(append(setpoint[:], 0xFF, 0x6A)) {
		t.Errorf("read back: % x, %v", got, err)
	}
	if _, err := m.WriteSingleCoil(0, 0xFF00); err != nil {
		t.Fatal(err)
	}
	if got, err := m.ReadCoils(0, 2); err != nil || string(got) != "\x03" {
		t.Errorf("coils after FC 5: % x, %v", got, err)
	}

	mustPublish(t, b, "plant/flow", "not a number")
	refusals := []struct {
		name string
		call func() ([]byte, error)
		code byte
	}{
		{"unmapped register", func() ([]byte, error) { return m.ReadHoldingRegisters(200, 1) }, IllegalDataAddress},
		{"gap in the range", func() ([]byte, error) { return m.ReadHoldingRegisters(10, 4) }, IllegalDataAddress},
		{"read-only tag", func() ([]byte, error) { return m.WriteMultipleRegisters(10, 2, []byte{0, 0, 0, 1}) }, IllegalDataAddress},
		{"half a float32", func() ([]byte, error) { return m.WriteSingleRegister(100, 1) }, IllegalDataAddress},
		{"value that is not a number", func() ([]byte, error) { return m.ReadInputRegisters(0, 2) }, ServerDeviceFailure},
		{"function not served", func() ([]byte, error) { return m.ReadFIFOQueue(0) }, IllegalFunction},
	}
	for _, r := range refusals {
		_, err := r.call()
		if code := exception(err); code != r.code {
			t.Errorf("%s: %v, want exception %d", r.name, err, r.code)
		}
	}
	if got, err := m.ReadCoils(0, 2); err != nil || string(got) != "\x03" {
		t.Errorf("the connection after the exceptions: % x, %v", got, err)
	}
	if st := h.Stats(); st.Exceptions != uint64(len(refusals))+1 || st.Published != 5 || st.Malformed != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestUnitIDs(t *testing.T) {
	cfg := plantMap
	cfg.UnitIDs = []int{1, 17}
	b := bus.New(bus.Options{})
	mustPublish(t, b, "plant/pump", "on")
	h := New(cfg, b, nil)
	addr, _ := serve(t, h)
	if _, err := master(t, addr, 17).ReadCoils(0, 1); err != nil {
		t.Errorf("unit 17: %v", err)
	}
	if _, err := master(t, addr, 2).ReadCoils(0, 1); exception(err) != GatewayPathUnavailable {
		t.Errorf("unit 2: %v, want exception 0x0A", err)
	}
}

// rawExchange writes p on a fresh connection and reads n bytes back.
func rawExchange(t *testing.T, addr string, p []byte, n int) ([]byte, net.Conn) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, safetyNet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(safetyNet))
	if _, err := nc.Write(p); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if _, err := io.ReadFull(nc, got); err != nil && n > 0 {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return got, nc
}

// Requests sent back to back are answered in order, exceptions included.
func TestPipelinedRequests(t *testing.T) {
	b := bus.New(bus.Options{})
	mustPublish(t, b, "plant/flow", "7")
	mustPublish(t, b, "plant/pump", "off")
	mustPublish(t, b, "plant/fan", "0")
	h := New(plantMap, b, nil)
	addr, _ := serve(t, h)
	three := append(adu(1, 1, 0x04, 0, 1, 0, 1), adu(2, 1, 0x01, 0, 0, 0, 2)...)
	three = append(three, adu(3, 1, 0x03, 0, 0, 0, 126)...) // over the limit of 125
	got, _ := rawExchange(t, addr, three, 11+10+9)
	want := append([]byte{0, 1, 0, 0, 0, 5, 1, 0x04, 2, 0, 7}, 0, 2, 0, 0, 0, 4, 1, 0x01, 1, 0)
	want = append(want, 0, 3, 0, 0, 0, 3, 1, 0x83, IllegalDataValue)
	if string(got) != string(want) {
		t.Errorf("got % x\nwant % x", got, want)
	}
}

// A broken MBAP header has no exception: the connection is closed and
// counted, and other masters carry on.
func TestBrokenHeaderCloses(t *testing.T) {
	b := bus.New(bus.Options{})
	mustPublish(t, b, "plant/pump", "on")
	h := New(plantMap, b, nil)
	addr, reasons := serve(t, h)
	_, nc := rawExchange(t, addr, []byte{0, 1, 0, 7, 0, 6, 1, 3, 0, 0, 0, 1}, 0)
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Error("the connection stayed open")
	}
	if err := <-reasons; !errors.Is(err, ErrProtocolID) || !errors.Is(err, protocols.ErrMalformed) {
		t.Errorf("close reason %v", err)
	}
	if _, err := master(t, addr, 1).ReadCoils(0, 1); err != nil {
		t.Errorf("another master: %v", err)
	}
	if h.Stats().Malformed != 1 {
		t.Errorf("stats %+v", h.Stats())
	}
}

func TestReloadMap(t *testing.T) {
	b := bus.New(bus.Options{})
	mustPublish(t, b, "plant/pump", "on")
	h := New(config.Modbus{}, b, nil)
	addr, _ := serve(t, h)
	m := master(t, addr, 1)
	if _, err := m.ReadCoils(0, 1); exception(err) != IllegalDataAddress {
		t.Fatalf("empty map: %v", err)
	}
	h.Reload(plantMap)
	if _, err := m.ReadCoils(0, 1); err != nil {
		t.Errorf("after reload: %v", err)
	}
}

// A tag with no value is not zero: never published, or older than
// max_age, a read gets exception 0x0B, the whole read, however many tags
// it covers; no_value: zero reads 0 instead.
func TestTagWithoutValue(t *testing.T) {
	var clock atomic.Int64
	clock.Store(1e9)
	b := bus.New(bus.Options{Now: clock.Load})
	cfg := plantMap
	cfg.MaxAge = 5 * time.Second
	h := New(cfg, b, nil)
	addr, _ := serve(t, h)
	m := master(t, addr, 1)
	mustPublish(t, b, "plant/temp", "2.5")
	reads := []struct {
		name string
		read func() ([]byte, error)
		exc  byte
	}{
		{"fresh", func() ([]byte, error) { return m.ReadInputRegisters(0, 1) }, 0},
		{"one of two never published", func() ([]byte, error) { return m.ReadInputRegisters(0, 2) }, GatewayTargetFailed},
		{"coil never published", func() ([]byte, error) { return m.ReadCoils(0, 2) }, GatewayTargetFailed},
		{"discrete input never published", func() ([]byte, error) { return m.ReadDiscreteInputs(5, 1) }, GatewayTargetFailed},
	}
	for _, r := range reads {
		if _, err := r.read(); exception(err) != r.exc {
			t.Errorf("%s: %v, want exception %d", r.name, err, r.exc)
		}
	}
	clock.Add(int64(5 * time.Second))
	if got, err := m.ReadInputRegisters(0, 1); err != nil || string(got) != "\x00\x19" {
		t.Errorf("exactly max_age old: % x, %v", got, err)
	}
	clock.Add(1)
	if _, err := m.ReadInputRegisters(0, 1); exception(err) != GatewayTargetFailed {
		t.Errorf("older than max_age: %v, want exception 0x0B", err)
	}
	mustPublish(t, b, "plant/temp", "3")
	if got, err := m.ReadInputRegisters(0, 1); err != nil || string(got) != "\x00\x1e" {
		t.Errorf("republished: % x, %v", got, err)
	}

	cfg.NoValue = NoValueZero
	h.Reload(cfg)
	clock.Add(int64(time.Minute))
	if got, err := m.ReadInputRegisters(0, 2); err != nil || string(got) != "\x00\x00\x00\x00" {
		t.Errorf("no_value zero: % x, %v; want zeros", got, err)
	}
}

// A write the bus refuses (here a full cache and a tag nobody reserved)
// is exception 04, never acknowledged: the gateway reserves tags, so it
// does not happen there.
func TestRefusedWriteIsAnException(t *testing.T) {
	b := bus.New(bus.Options{MaxTopics: 1})
	mustPublish(t, b, "junk", "x")
	h := New(plantMap, b, nil)
	addr, _ := serve(t, h)
	m := master(t, addr, 1)
	if _, err := m.WriteSingleRegister(102, 7); exception(err) != ServerDeviceFailure {
		t.Fatalf("write into a full cache: %v, want exception 04", err)
	}
	if _, ok := b.Get("plant/limit"); ok {
		t.Fatal("the refused write was cached")
	}
	if err := b.Reserve("test", []string{"plant/limit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteSingleRegister(102, 7); err != nil {
		t.Fatalf("write to a reserved tag: %v", err)
	}
}

// memConn collects what a session writes.
type memConn struct{ out []byte }

func (c *memConn) ID() uint64               { return 1 }
func (c *memConn) Peer() netip.AddrPort     { return netip.AddrPort{} }
func (c *memConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (c *memConn) Buffered() int            { return 0 }
func (c *memConn) SetTimer(time.Duration)   {}
func (c *memConn) Notify()                  {}
func (c *memConn) CountDropped(int)         {}
func (c *memConn) Close(error)              {}
func (c *memConn) Write(p []byte) error     { c.out = append(c.out, p...); return nil }

// FuzzSession: any input is consumed up to a whole number of requests,
// each answered by exactly one well-formed response with its transaction
// id, or the session refuses a broken header; never a panic.
func FuzzSession(f *testing.F) {
	f.Add(adu(1, 1, 0x03, 0, 100, 0, 3))
	f.Add(append(adu(1, 1, 0x0F, 0, 0, 0, 2, 1, 3), adu(2, 1, 0x10, 0, 100, 0, 2, 4, 0x41, 0xB4, 0, 0)...))
	f.Add(adu(9, 1, 0x04, 0, 0, 0, 2))
	f.Add([]byte{0, 1, 0, 7, 0, 6})
	b := bus.New(bus.Options{})
	mustPublish(f, b, "plant/temp", "4000")
	mustPublish(f, b, "plant/flow", "-1")
	mustPublish(f, b, "plant/alarm", "maybe")
	h := New(plantMap, b, nil)
	f.Fuzz(func(t *testing.T, in []byte) {
		c := &memConn{}
		s, _ := h.Open(c)
		n, _ := s.Data(in) // an error (a broken header) only ends the input early
		if n < 0 || n > len(in) {
			t.Fatalf("consumed %d of %d", n, len(in))
		}
		var reqs []ADU
		for p := in[:n]; len(p) > 0; {
			a, k, perr := ParseADU(p)
			if perr != nil || k == 0 {
				t.Fatalf("consumed bytes that are not whole requests: %v", perr)
			}
			reqs, p = append(reqs, a), p[k:]
		}
		answered := 0
		for p := c.out; len(p) > 0; answered++ {
			if answered >= len(reqs) || len(p) < mbapSize+2 || binary.BigEndian.Uint16(p) != reqs[answered].Transaction {
				t.Fatalf("response %d does not answer request %d: % x", answered, answered, p)
			}
			p = p[6+int(binary.BigEndian.Uint16(p[4:])):]
		}
		if answered != len(reqs) {
			t.Fatalf("%d requests, %d responses", len(reqs), answered)
		}
	})
}
