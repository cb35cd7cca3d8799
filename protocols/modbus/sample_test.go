package modbus

import (
	"testing"

	"github.com/edgemux/edgemux/route/bus"
)

// TestPolledPayloads: the register map reads "v" out of the poller's
// {"v","q","ts"} payloads (a number, a bool, a scaled number); a stale or
// bad one is exception 0x0B, even under no_value: zero, never the old
// value or a zero; a payload that is not a value is 0x04.
func TestPolledPayloads(t *testing.T) {
	b := bus.New(bus.Options{})
	cfg := plantMap
	cfg.NoValue = NoValueZero
	h := New(cfg, b, nil)
	addr, _ := serve(t, h)
	m := master(t, addr, 1)
	mustPublish(t, b, "plant/temp", `{"v":-1.5,"q":"good","ts":1767225600123}`)
	mustPublish(t, b, "plant/flow", `{"v":7,"q":"good","ts":1767225600123}`)
	mustPublish(t, b, "plant/pump", `{"v":true,"q":"good","ts":1767225600123}`)
	mustPublish(t, b, "plant/fan", `{"v":false,"q":"good","ts":1767225600123}`)
	if got, err := m.ReadInputRegisters(0, 2); err != nil || string(got) != "\xff\xf1\x00\x07" {
		t.Fatalf("good values: % x, %v", got, err)
	}
	if got, err := m.ReadCoils(0, 2); err != nil || string(got) != "\x01" {
		t.Fatalf("good coils: % x, %v", got, err)
	}
	for _, p := range []string{
		`{"v":7,"q":"stale","ts":1767225600123,"err":"modbus: upstream device did not respond in time"}`,
		`{"v":null,"q":"bad","ts":1767225600123,"err":"exception 0x02"}`,
	} {
		mustPublish(t, b, "plant/flow", p)
		if got, err := m.ReadInputRegisters(0, 2); exception(err) != GatewayTargetFailed {
			t.Fatalf("%s: % x, %v; want exception 0x0B", p, got, err)
		}
	}
	mustPublish(t, b, "plant/flow", `{"q":"good"}`)
	if got, err := m.ReadInputRegisters(1, 1); exception(err) != ServerDeviceFailure {
		t.Fatalf("an object without v: % x, %v; want exception 0x04", got, err)
	}
}
