package gateway

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goburrow "github.com/goburrow/modbus"
	"github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
)

// dialInDevice is a dial-in device of ours, written from the Modbus TCP
// guide and not from edgemux's framing: it connects to the gateway, says
// nothing, and answers each MBAP read of holding registers from its own
// registers (exception 0x02 for any other). pymodbus cannot act it out:
// its servers listen, its clients speak first.
type dialInDevice struct {
	conn  net.Conn
	regs  map[uint16]*atomic.Uint32
	reads atomic.Int64 // requests answered
	done  chan struct{}
}

func startDialInDevice(t *testing.T, addr string, regs map[uint16]*atomic.Uint32) *dialInDevice {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	d := &dialInDevice{conn: c, regs: regs, done: make(chan struct{})}
	t.Cleanup(func() { c.Close(); <-d.done })
	go d.serve()
	return d
}

func (d *dialInDevice) serve() {
	defer close(d.done)
	var hdr [7]byte
	for {
		if _, err := io.ReadFull(d.conn, hdr[:]); err != nil {
			return
		}
		pdu := make([]byte, int(binary.BigEndian.Uint16(hdr[4:]))-1)
		if _, err := io.ReadFull(d.conn, pdu); err != nil {
			return
		}
		resp := d.answer(pdu)
		out := append(hdr[:4:4], byte((len(resp)+1)>>8), byte(len(resp)+1), hdr[6])
		if _, err := d.conn.Write(append(out, resp...)); err != nil {
			return
		}
		d.reads.Add(1)
	}
}

func (d *dialInDevice) answer(pdu []byte) []byte {
	if len(pdu) != 5 || pdu[0] != 3 {
		return []byte{pdu[0] | 0x80, 0x01}
	}
	start, n := binary.BigEndian.Uint16(pdu[1:]), binary.BigEndian.Uint16(pdu[3:])
	resp := []byte{3, byte(2 * n)}
	for a := start; a < start+n; a++ {
		r := d.regs[a]
		if r == nil {
			return []byte{0x83, 0x02}
		}
		resp = binary.BigEndian.AppendUint16(resp, uint16(r.Load()))
	}
	return resp
}

// dialInConfig: sniff.probe on the modbus pool; one dial-in line whose
// device answers the probe (holding register 100, unit 7) with 4242, one
// device on it polled every 50ms, reached by masters as unit 21.
func dialInConfig(t *testing.T) config.Config {
	cfg := rbConfig(t)
	// Long enough for a client that speaks first to do so on a loaded
	// machine (a WebSocket client here): the probe is for the silent.
	cfg.Sniff.Deadline = time.Second
	cfg.Sniff.Probe = "modbus"
	cfg.Sniff.ProbeTimeout = 10 * time.Second
	cfg.Modbus.Upstream.DialIn.Probe = config.ModbusProbe{UnitID: 7, Function: 3, Address: 100, Count: 1}
	cfg.Modbus.Upstream.Lines = []config.ModbusLine{{Name: "dtu", Kind: "dial-in", Identity: "4242"}}
	cfg.Modbus.Upstream.Devices = []config.ModbusDevice{{Name: "plc7", Line: "dtu", UnitID: 7, GatewayUnit: 21, Timeout: 5 * time.Second,
		Poll: config.ModbusPoll{Interval: 50 * time.Millisecond, OnChange: true,
			Tags: []config.ModbusPollTag{{Topic: "plant/dtu/level", Table: "holding", Address: 10, Type: "uint16"}}}}}
	return cfg
}

func dialInRegs(id, level uint32) map[uint16]*atomic.Uint32 {
	regs := map[uint16]*atomic.Uint32{100: {}, 10: {}}
	regs[100].Store(id)
	regs[10].Store(level)
	return regs
}

// pollSample is the poller's payload as a WebSocket client receives it.
type pollSample struct {
	V *float64 `json:"v"`
	Q string   `json:"q"`
}

// awaitSample reads ws until topic carries a sample of quality q (and,
// for good and stale ones, value v).
func awaitSample(t *testing.T, ws *websocket.Conn, topic, q string, v float64) {
	t.Helper()
	for {
		m, err := btWSRead(ws)
		if err != nil {
			t.Fatalf("waiting for %s %s %v: %v", topic, q, v, err)
		}
		var s pollSample
		if m.Topic != topic || json.Unmarshal(m.Data, &s) != nil {
			continue
		}
		if s.Q == q && s.V != nil && *s.V == v {
			return
		}
	}
}

// dialInSub subscribes to the device's tags; what comes first (the
// retained bad sample of a device not yet connected) awaitSample skips.
func dialInSub(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	if err := ws.WriteJSON(map[string]string{"op": "sub", "topic": "plant/dtu/#"}); err != nil {
		t.Fatal(err)
	}
}

func dialInHealth(g *Gateway, name string) ModbusDevice {
	for _, d := range g.modbusDevices() {
		if d.Name == name {
			return d
		}
	}
	return ModbusDevice{}
}

// TestModbusDialInDevice: a device that connects and stays silent is
// probed, identified by its register, polled over its own connection
// (its tag reaches a WebSocket client) and reachable by a master through
// gateway mode; when it hangs up its tag goes stale, health shows it
// disconnected and masters get 0x0A; when it calls again polling resumes.
// A master that speaks first is served as before, never probed.
func TestModbusDialInDevice(t *testing.T) {
	g := startGateway(t, dialInConfig(t), Options{})
	addr := g.Addr().String()
	ws := btWSDial(t, g)
	dialInSub(t, ws)

	regs := dialInRegs(4242, 17)
	dev := startDialInDevice(t, addr, regs)
	awaitSample(t, ws, "plant/dtu/level", "good", 17)
	if h := dialInHealth(g, "plc7"); h.Connected == nil || !*h.Connected || h.Counts["connects"] != 1 {
		t.Fatalf("health of the connected device: %+v", h)
	}

	master := func() (goburrow.Client, func()) {
		h := goburrow.NewTCPClientHandler(addr)
		h.SlaveId, h.Timeout = 21, rbIOTimeout
		if err := h.Connect(); err != nil {
			t.Fatal(err)
		}
		return goburrow.NewClient(h), func() { h.Close() }
	}
	cl, closeMaster := master()
	got, err := cl.ReadHoldingRegisters(10, 1)
	if err != nil || binary.BigEndian.Uint16(got) != 17 {
		t.Fatalf("master through gateway mode to the dial-in device: %x, %v", got, err)
	}
	regs[10].Store(18)
	awaitSample(t, ws, "plant/dtu/level", "good", 18)

	dev.conn.Close()
	awaitSample(t, ws, "plant/dtu/level", "stale", 18)
	eventually(t, "the device shown disconnected, its polls failing", func() bool {
		h := dialInHealth(g, "plc7")
		return h.Connected != nil && !*h.Connected && h.Counts["failed"] > 5
	})
	// Not demoted for being away (demotion would answer 0x0B and hold
	// its polls back once it is back): the path is what is missing.
	if h := dialInHealth(g, "plc7"); h.Demoted {
		t.Fatalf("a disconnected device is demoted: %+v", h)
	}
	_, err = cl.ReadHoldingRegisters(10, 1)
	var me *goburrow.ModbusError
	if !errors.As(err, &me) || me.ExceptionCode != 0x0A {
		t.Fatalf("master while the device is away: %v, want exception 0x0A", err)
	}
	closeMaster()

	regs[10].Store(19)
	startDialInDevice(t, addr, regs)
	awaitSample(t, ws, "plant/dtu/level", "good", 19)
	if h := dialInHealth(g, "plc7"); h.Connected == nil || !*h.Connected || h.Counts["connects"] != 2 {
		t.Fatalf("health after the device called again: %+v", h)
	}
	st := g.mb.Stats()
	if st.Probed != 2 || st.DialIns != 2 || st.DialInRefused != 0 || st.DialInUnknown != 0 {
		t.Fatalf("handler counters: %+v", st)
	}
}

// TestModbusDialInReplaced: a second connection answering with the same
// identity takes the line; the first is closed.
func TestModbusDialInReplaced(t *testing.T) {
	g := startGateway(t, dialInConfig(t), Options{})
	ws := btWSDial(t, g)
	dialInSub(t, ws)
	first := startDialInDevice(t, g.Addr().String(), dialInRegs(4242, 1))
	awaitSample(t, ws, "plant/dtu/level", "good", 1)
	startDialInDevice(t, g.Addr().String(), dialInRegs(4242, 2))
	awaitSample(t, ws, "plant/dtu/level", "good", 2)
	first.conn.SetReadDeadline(time.Now().Add(rbIOTimeout))
	select {
	case <-first.done: // its serve loop read EOF: the gateway closed it
	case <-time.After(rbIOTimeout):
		t.Fatal("the replaced connection stays open")
	}
	if st := g.mb.Stats(); st.DialIns != 2 || st.DialInReplaced != 1 {
		t.Fatalf("handler counters: %+v", st)
	}
	if h := dialInHealth(g, "plc7"); h.Connected == nil || !*h.Connected {
		t.Fatalf("health after the replacement: %+v", h)
	}
}

// TestModbusDialInBadAnswers: a silent peer that answers the probe with
// something else (text, a response with another transaction id, an
// exception) is closed and recorded as malformed; one whose identity no
// line has is closed and counted.
func TestModbusDialInBadAnswers(t *testing.T) {
	g := startGateway(t, dialInConfig(t), Options{})
	answers := []func(req []byte) []byte{
		func([]byte) []byte { return []byte("hello there\n") },
		func(req []byte) []byte { return []byte{req[0] ^ 0xFF, req[1], 0, 0, 0, 5, 7, 3, 2, 0x10, 0x92} },
		func(req []byte) []byte { return []byte{req[0], req[1], 0, 0, 0, 3, 7, 0x83, 0x02} },
		func(req []byte) []byte { return []byte{req[0], req[1], 0, 0, 0, 5, 7, 3, 2, 0, 99} }, // identity 99: no line
	}
	for i, answer := range answers {
		c := dial(t, g)
		c.SetDeadline(time.Now().Add(rbIOTimeout))
		req := make([]byte, 12)
		if _, err := io.ReadFull(c, req); err != nil {
			t.Fatalf("answer %d: no probe: %v", i, err)
		}
		if want := []byte{0, 0, 0, 6, 7, 3, 0, 100, 0, 1}; string(req[2:]) != string(want) {
			t.Fatalf("probe %x, want the read of holding register 100 from unit 7", req)
		}
		c.Write(answer(req))
		if rest, err := io.ReadAll(c); err != nil || len(rest) > 0 {
			t.Fatalf("answer %d: want the connection closed, got %q, %v", i, rest, err)
		}
		c.Close()
	}
	eventually(t, "three malformed records", func() bool {
		return g.Book().Stats().Reasons[protocols.ReasonMalformed] == 3
	})
	if st := g.mb.Stats(); st.Probed != 4 || st.DialInRefused != 3 || st.DialInUnknown != 1 || st.DialIns != 0 {
		t.Fatalf("handler counters: %+v", st)
	}
	if h := dialInHealth(g, "plc7"); h.Connected == nil || *h.Connected {
		t.Fatalf("health: %+v", h)
	}
}

// TestModbusDialInBySource: with identify_by source the peer's address
// names the device, whatever its registers say.
func TestModbusDialInBySource(t *testing.T) {
	cfg := dialInConfig(t)
	cfg.Modbus.Upstream.DialIn.IdentifyBy = "source"
	cfg.Modbus.Upstream.Lines[0].Identity = "127.0.0.1"
	g := startGateway(t, cfg, Options{})
	ws := btWSDial(t, g)
	dialInSub(t, ws)
	startDialInDevice(t, g.Addr().String(), dialInRegs(1, 33))
	awaitSample(t, ws, "plant/dtu/level", "good", 33)
	if h := dialInHealth(g, "plc7"); h.Connected == nil || !*h.Connected || !strings.HasPrefix(h.Peer, "127.0.0.1:") {
		t.Fatalf("health: %+v", h)
	}
}

// TestModbusDialInThroughSocat: a DTU played by peers we did not write.
// socat dials the gateway and bridges that connection to a pymodbus TCP
// device, as a cellular DTU bridges its outbound connection to a PLC: it
// says nothing until the gateway's probe, which socat carries to
// pymodbus, whose answer (holding register 5 holds 1005) names the line.
// The device is then polled, and a master reaches it through gateway mode.
func TestModbusDialInThroughSocat(t *testing.T) {
	devAddr := upstreamtest.TCPDevice(t, 7)
	cfg := dialInConfig(t)
	cfg.Modbus.Upstream.DialIn.Probe = config.ModbusProbe{UnitID: 7, Function: 3, Address: 5, Count: 1}
	cfg.Modbus.Upstream.Lines[0].Identity = "1005"
	g := startGateway(t, cfg, Options{})
	ws := btWSDial(t, g)
	dialInSub(t, ws)

	dtu := exec.Command("socat", "TCP:"+g.Addr().String(), "TCP:"+devAddr)
	if err := dtu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dtu.Process.Kill(); dtu.Wait() })
	awaitSample(t, ws, "plant/dtu/level", "good", 1010)

	h := goburrow.NewTCPClientHandler(g.Addr().String())
	h.SlaveId, h.Timeout = 21, rbIOTimeout
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	got, err := goburrow.NewClient(h).ReadHoldingRegisters(12, 2)
	if err != nil || binary.BigEndian.Uint16(got) != 1012 || binary.BigEndian.Uint16(got[2:]) != 1013 {
		t.Fatalf("master through gateway mode to pymodbus behind socat: %x, %v", got, err)
	}
	if st := g.mb.Stats(); st.Probed != 1 || st.DialIns != 1 || st.DialInRefused != 0 {
		t.Fatalf("handler counters: %+v", st)
	}
}
