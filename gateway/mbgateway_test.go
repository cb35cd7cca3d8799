package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	goburrow "github.com/goburrow/modbus"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
)

// TestModbusGatewayMode: masters on the shared port reach upstream
// devices by gateway unit id: Debian's mbpoll and goburrow/modbus as
// masters, pymodbus as the devices, over Modbus TCP (unit 11) and over
// RTU on a socat pty pair (unit 12); a unit on the RTU line that never
// answers gets exception 0x0B, a TCP device nobody listens for gets 0x0A,
// and the register map still answers its own unit ids.
func TestModbusGatewayMode(t *testing.T) {
	mbpoll := requireMbpoll(t)
	tcpDev := upstreamtest.TCPDevice(t, 1)
	rtuPath := upstreamtest.RTUDevice(t, 19200, 5)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nobody listens there: connection refused

	cfg := rbConfig(t)
	cfg.Modbus.UnitIDs = []int{1}
	cfg.Modbus.Tags = []config.ModbusTag{{Topic: "local/x", Table: "holding", Address: 0, Type: "uint16", Writable: true}}
	cfg.Modbus.Upstream = config.ModbusUpstream{
		Lines: []config.ModbusLine{
			{Name: "plc", Kind: "tcp", Address: tcpDev},
			{Name: "bus", Kind: "rtu", Address: rtuPath, Baud: 19200, Parity: "N"},
			{Name: "gone", Kind: "tcp", Address: deadAddr},
		},
		Devices: []config.ModbusDevice{
			{Name: "plc1", Line: "plc", UnitID: 1, GatewayUnit: 11, Timeout: 5 * time.Second},
			{Name: "meter5", Line: "bus", UnitID: 5, GatewayUnit: 12, Timeout: 2 * time.Second, Retries: 2, ProbeEvery: 50 * time.Millisecond},
			{Name: "silent", Line: "bus", UnitID: 6, GatewayUnit: 13, Timeout: 200 * time.Millisecond},
			{Name: "nowhere", Line: "gone", UnitID: 1, GatewayUnit: 14},
		},
	}
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*rbIOTimeout)
	defer cancel()

	mbpollRead := func(unit, ref string) (string, error) {
		cmd := exec.CommandContext(ctx, mbpoll, "-m", "tcp", "-a", unit, "-0", "-1", "-o", "10", "-p", port,
			"-t", "4", "-r", ref, "-c", "3", "127.0.0.1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := mbpollRead("11", "0")
	if err != nil || !strings.Contains(out, "[0]: \t1000") || !strings.Contains(out, "[2]: \t1002") {
		t.Fatalf("mbpoll through the gateway to pymodbus over TCP: %v\n%s", err, out)
	}
	upstreamtest.Wait(t, "the RTU device through the gateway", func() bool {
		out, err = mbpollRead("12", "4")
		return err == nil
	})
	if !strings.Contains(out, "[4]: \t1004") || !strings.Contains(out, "[6]: \t1006") {
		t.Fatalf("mbpoll through the gateway to pymodbus over RTU:\n%s", out)
	}

	master := func(unit byte) goburrow.Client {
		h := goburrow.NewTCPClientHandler(addr)
		h.SlaveId, h.Timeout = unit, rbIOTimeout
		if err := h.Connect(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return goburrow.NewClient(h)
	}
	rtu := master(12)
	if _, err := rtu.WriteSingleRegister(9, 4321); err != nil {
		t.Fatalf("write through the gateway over RTU: %v", err)
	}
	if got, err := rtu.ReadHoldingRegisters(9, 1); err != nil || got[0] != 4321>>8 || got[1] != 4321&0xFF {
		t.Fatalf("read back over RTU: % x %v", got, err)
	}
	wantException := func(unit byte, address uint16, code byte) {
		t.Helper()
		_, err := master(unit).ReadHoldingRegisters(address, 1)
		var me *goburrow.ModbusError
		if !errors.As(err, &me) || me.ExceptionCode != code {
			t.Fatalf("unit %d: %v, want exception %#x", unit, err, code)
		}
	}
	wantException(13, 0, 0x0B)    // on the line, never answers
	wantException(14, 0, 0x0A)    // its line cannot connect
	wantException(12, 5000, 0x02) // the device's own exception: past its registers
	wantException(1, 0, 0x0B)     // the register map's own unit: local/x never published
	wantException(2, 0, 0x0A)     // neither the map's unit nor a device's
	pipelinedInOrder(t, addr)
	st := g.Snapshot().Modbus
	if st["forwarded"] < 7 || st["upstream_failed"] < 2 { // more while the RTU device started
		t.Fatalf("modbus counters %v: want forwarded requests and two upstream failures", st)
	}
	devs := map[string]ModbusDevice{}
	for _, d := range g.Snapshot().ModbusDevices {
		devs[d.Name] = d
	}
	if d := devs["silent"]; d.Counts["timeouts"] != 1 || d.Counts["failed"] != 1 || d.Line != "bus" {
		t.Errorf("silent device in /api/stats: %+v", d)
	}
	if d := devs["meter5"]; d.Counts["ok"] < 3 || d.RTTms <= 0 {
		t.Errorf("RTU device in /api/stats: %+v", d)
	}
	m := httpGet(t, g, "/metrics")
	if v := metric(m, `edgemux_modbus_device_total{device="silent",event="timeouts",line="bus"}`); v != "1" {
		t.Errorf("silent device's timeouts in /metrics: %q, want 1", v)
	}
	if v := metric(m, `edgemux_modbus_device_total{device="plc1",event="ok",line="plc"}`); v != "2" {
		t.Errorf("TCP device's answers in /metrics: %q, want 2 (mbpoll, the pipelined read)", v)
	}
}

// pipelinedInOrder sends, in one write, a request for the upstream device
// (unit 11) and then one for the register map (unit 1, answered at once):
// the answers must come back in request order, transaction ids 1 then 2.
func pipelinedInOrder(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(rbIOTimeout))
	reqs := []byte{0, 1, 0, 0, 0, 6, 11, 3, 0, 0, 0, 1, 0, 2, 0, 0, 0, 6, 1, 3, 0, 0, 0, 1}
	if _, err := c.Write(reqs); err != nil {
		t.Fatal(err)
	}
	var tids []int
	for range 2 {
		var h [7]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			t.Fatal(err)
		}
		rest := make([]byte, int(h[5])-1)
		if _, err := io.ReadFull(c, rest); err != nil {
			t.Fatal(err)
		}
		tids = append(tids, int(h[1]))
	}
	if tids[0] != 1 || tids[1] != 2 {
		t.Fatalf("answers in order %v, want [1 2]", tids)
	}
}
