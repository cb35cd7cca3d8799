package gateway

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	goburrow "github.com/goburrow/modbus"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

const mbpollInstallHint = "mbpoll is not installed: run `make deps` (.ci/deps installs it with apt-get)"

// requireMbpoll fails the test (skips it with -short) when mbpoll, the
// Modbus master from Debian, is missing.
func requireMbpoll(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("mbpoll")
	if err != nil {
		if testing.Short() {
			t.Skip("-short: " + mbpollInstallHint)
		}
		t.Fatal(mbpollInstallHint)
	}
	return path
}

// TestModbusMastersAndDevices: on the shared port, a private-protocol
// device publishes a temperature and subscribes to a setpoint; two real
// Modbus masters, goburrow/modbus and Debian's mbpoll, read the
// temperature from the register map and write the setpoint, which the
// device receives.
func TestModbusMastersAndDevices(t *testing.T) {
	mbpoll := requireMbpoll(t)
	cfg := rbConfig(t)
	cfg.Modbus.Tags = []config.ModbusTag{
		{Topic: "plant/line1/temp", Table: "input", Address: 0, Type: "int16", Scale: 10},
		{Topic: "plant/line1/setpoint", Table: "holding", Address: 100, Type: "float32", Writable: true},
	}
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), rbIOTimeout)
	defer cancel()
	device, err := private.Dial(ctx, addr, "plc-gw-1", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer device.Close()
	if err := device.Subscribe("plant/line1/setpoint"); err != nil {
		t.Fatal(err)
	}
	if err := device.Publish("plant/line1/temp", []byte("21.7"), true); err != nil {
		t.Fatal(err)
	}

	h := goburrow.NewTCPClientHandler(addr)
	h.SlaveId, h.Timeout = 1, rbIOTimeout
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	master := goburrow.NewClient(h)
	if got, err := master.ReadInputRegisters(0, 1); err != nil || binary.BigEndian.Uint16(got) != 217 {
		t.Fatalf("goburrow read: % x, %v; want 217", got, err)
	}
	var setpoint [4]byte
	binary.BigEndian.PutUint32(setpoint[:], math.Float32bits(22.5))
	if _, err := master.WriteMultipleRegisters(100, 2, setpoint[:]); err != nil {
		t.Fatalf("goburrow write: %v", err)
	}
	waitDelivery(t, ctx, device, "plant/line1/setpoint", "22.5")

	_, port, _ := net.SplitHostPort(addr)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, mbpoll, append([]string{"-m", "tcp", "-a", "1", "-0", "-1", "-o", "5", "-p", port, "127.0.0.1"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mbpoll %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("-t", "3", "-r", "0", "-c", "1"); !strings.Contains(out, "[0]: \t217") && !strings.Contains(out, "[0]: 217") {
		t.Errorf("mbpoll read of the temperature:\n%s", out)
	}
	run("-t", "4:float", "-B", "-r", "100", "23.25")
	waitDelivery(t, ctx, device, "plant/line1/setpoint", "23.25")

	m := httpGet(t, g, "/metrics")
	if v := metric(m, `edgemux_modbus_total{event="writes"}`); v != "2" {
		t.Errorf("modbus writes in /metrics: %q, want 2", v)
	}
	if st := g.Snapshot().Modbus; st["requests"] != 4 || st["exceptions"] != 0 {
		t.Errorf("snapshot: %v, want 4 requests (2 goburrow, 2 mbpoll) and no exception", st)
	}
}

// waitDelivery waits for the device to receive data on topic.
func waitDelivery(t *testing.T, ctx context.Context, c *private.Client, topic, data string) {
	t.Helper()
	for {
		select {
		case m := <-c.Messages():
			if m.Topic == topic && string(m.Data) == data && m.Src == "modbus" {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no %s = %s from modbus", topic, data)
		case <-time.After(rbIOTimeout):
			t.Fatalf("no %s = %s from modbus", topic, data)
		}
	}
}
