package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goburrow "github.com/goburrow/modbus"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
	"github.com/edgemux/edgemux/protocols/private"
)

// mbYAMLGateway starts a gateway from YAML text (validated, as edgemux
// check would) on a loopback port.
func mbYAMLGateway(t *testing.T, text string) *Gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	base := rbConfig(t)
	cfg.Listen, cfg.Loops, cfg.Limits, cfg.Quarantine, cfg.Log = base.Listen, base.Loops, base.Limits, base.Quarantine, base.Log
	return startGateway(t, cfg, Options{})
}

// mbMaster is a goburrow master of unit at addr.
func mbMaster(t *testing.T, addr string, unit byte) goburrow.Client {
	t.Helper()
	h := goburrow.NewTCPClientHandler(addr)
	h.SlaveId, h.Timeout = unit, rbIOTimeout
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return goburrow.NewClient(h)
}

// mbValue is a polled tag's payload, or a write's outcome.
type mbValue struct {
	V   any    `json:"v"`
	Q   string `json:"q"`
	OK  *bool  `json:"ok"`
	Err string `json:"err"`
}

// mbWatch collects what a private-protocol client subscribed to filter
// receives, newest per topic.
type mbWatch struct {
	c    *private.Client
	last map[string]mbValue
}

func mbSubscribe(t *testing.T, g *Gateway, filter string) *mbWatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rbIOTimeout)
	defer cancel()
	c, err := private.Dial(ctx, g.Addr().String(), "hmi-"+filter, private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Subscribe(filter); err != nil {
		t.Fatal(err)
	}
	return &mbWatch{c: c, last: map[string]mbValue{}}
}

// until takes deliveries until cond holds of the newest values.
func (w *mbWatch) until(t *testing.T, what string, cond func(last map[string]mbValue) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !cond(w.last) {
		select {
		case d, ok := <-w.c.Messages():
			if !ok {
				t.Fatalf("%s: connection ended: %v", what, w.c.Err())
			}
			var v mbValue
			if err := json.Unmarshal(d.Data, &v); err != nil {
				t.Fatalf("%s: %q: %v", d.Topic, d.Data, err)
			}
			w.last[d.Topic] = v
		case <-deadline:
			t.Fatalf("timed out waiting for %s; last %+v", what, w.last)
		}
	}
}

// TestModbusPollWriteFromClients: pymodbus over TCP polled from YAML; a
// WebSocket client writes a scaled setpoint, a Modbus master writes one
// through the register map and libcoap's client one with a CoAP PUT, each reaching the device (read from
// pymodbus directly) and coming back as the polled value; a private
// client writing a read-only tag gets NOT_WRITABLE (CoAP: 4.03), a
// WebSocket client writing a word gets bad-value (CoAP, out of range: 4.00), and a write the device refuses is told
// on the result topic; no refused value is ever delivered as the tag's.
func TestModbusPollWriteFromClients(t *testing.T) {
	dev := upstreamtest.TCPDevice(t, 1)
	g := mbYAMLGateway(t, fmt.Sprintf(`
modbus:
  unit_ids: [1]
  tags:
    - {topic: plant/sp, table: holding, address: 0, type: int16, scale: 10, writable: true}
  upstream:
    lines:
      - {name: plc, kind: tcp, address: "%s"}
    devices:
      - name: plc1
        line: plc
        unit_id: 1
        timeout: 5s
        poll:
          interval: 100ms
          on_change: true
          tags:
            - {topic: plant/sp, table: holding, address: 10, type: int16, scale: 0.1, writable: true}
            - {topic: plant/ro, table: holding, address: 11, type: uint16}
            - {topic: plant/far, table: holding, address: 3000, type: uint16, writable: true}
`, dev))
	w := mbSubscribe(t, g, "plant/#")
	w.until(t, "the first poll", func(l map[string]mbValue) bool { return l["plant/sp"].V == 101.0 && l["plant/ro"].V == 1011.0 })

	device := mbMaster(t, dev, 1)
	readDevice := func(addr uint16) int16 {
		t.Helper()
		b, err := device.ReadHoldingRegisters(addr, 1)
		if err != nil {
			t.Fatal(err)
		}
		return int16(uint16(b[0])<<8 | uint16(b[1]))
	}

	ws := btWSDial(t, g)
	if err := ws.WriteJSON(map[string]any{"op": "pub", "topic": "plant/sp", "data": -12.3}); err != nil {
		t.Fatal(err)
	}
	w.until(t, "the WebSocket write polled back", func(l map[string]mbValue) bool {
		r := l["plant/sp/$result"]
		return r.OK != nil && *r.OK && l["plant/sp"].V == -12.3
	})
	if got := readDevice(10); got != -123 {
		t.Fatalf("pymodbus holds %d after the WebSocket write, want -123", got)
	}

	master := mbMaster(t, g.Addr().String(), 1) // unit 1: the register map
	if _, err := master.WriteSingleRegister(0, 55); err != nil {
		t.Fatalf("Modbus master writing the register map: %v", err)
	}
	w.until(t, "the master's write polled back", func(l map[string]mbValue) bool { return l["plant/sp"].V == 5.5 })
	if got := readDevice(10); got != 55 {
		t.Fatalf("pymodbus holds %d after the master's write, want 55", got)
	}
	if got, err := master.ReadHoldingRegisters(0, 1); err != nil || got[0] != 0 || got[1] != 55 {
		t.Fatalf("the master reads the polled value back: % x, %v; want 55", got, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), rbIOTimeout)
	defer cancel()
	writer, err := private.Dial(ctx, g.Addr().String(), "writer", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if err := writer.Publish("plant/ro", []byte("7"), true); !errors.Is(err, private.CodeNotWritable) {
		t.Fatalf("private PUB to a read-only tag: %v, want NOT_WRITABLE", err)
	}
	if err := ws.WriteJSON(map[string]any{"op": "pub", "topic": "plant/sp", "data": "hot"}); err != nil {
		t.Fatal(err)
	}
	if m, err := btWSRead(ws); err != nil || m.Op != "error" || m.Code != "bad-value" {
		t.Fatalf("WebSocket pub of a word: %+v %v, want error bad-value", m, err)
	}
	if err := writer.Publish("plant/far", []byte("5"), true); !errors.Is(err, private.CodeWriteFailed) {
		t.Fatalf("private PUB to a writable tag pymodbus lacks: %v, want WRITE_FAILED", err)
	}
	coap := "coap://" + g.Addr().String() + "/t/plant/"
	if out := coapRun(t, "-m", "put", "-e", "7", coap+"ro"); !strings.Contains(out, "4.03") {
		t.Fatalf("CoAP PUT to a read-only tag: %q, want 4.03", out)
	}
	if out := coapRun(t, "-m", "put", "-e", "1e9", coap+"sp"); !strings.Contains(out, "4.00") {
		t.Fatalf("CoAP PUT of a value out of range: %q, want 4.00", out)
	}
	coapRun(t, "-m", "put", "-e", "2.5", coap+"sp")
	w.until(t, "the CoAP write polled back", func(l map[string]mbValue) bool { return l["plant/sp"].V == 2.5 })
	if _, err := master.WriteSingleRegister(0, 55); err != nil {
		t.Fatal(err)
	}
	w.until(t, "the master's write again", func(l map[string]mbValue) bool { return l["plant/sp"].V == 5.5 })
	w.until(t, "the device's refusal", func(l map[string]mbValue) bool {
		r := l["plant/far/$result"]
		return r.OK != nil && !*r.OK && r.Err == "exception 0x02"
	})
	if got := readDevice(11); got != 1011 {
		t.Fatalf("pymodbus register 11 is %d, want it untouched", got)
	}
	if l := w.last; l["plant/ro"].V != 1011.0 || l["plant/far"].Q != "bad" || l["plant/sp"].V != 5.5 {
		t.Fatalf("values after the refused writes: %+v", l)
	}
}
