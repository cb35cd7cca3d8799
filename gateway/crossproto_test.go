package gateway

// One bus behind every protocol: a value published over CoAP reaches a
// WebSocket client, a UDP device of the private protocol and a Modbus
// master; values published over each of those reach a CoAP client.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	goburrow "github.com/goburrow/modbus"
	gws "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

func TestCoAPValueOnEveryProtocol(t *testing.T) {
	requireCoAPClient(t)
	_, addr := coapGateway(t, func(c *config.Config) {
		c.Modbus.Tags = []config.ModbusTag{
			{Topic: "cross/temp", Table: "holding", Address: 0, Type: "int16", Scale: 10},
			{Topic: "cross/setpoint", Table: "holding", Address: 10, Type: "int16", Writable: true},
		}
	})
	ws, _, err := gws.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	// The pong says the subscription before it is in place.
	for _, m := range []string{`{"op":"sub","topic":"cross/#"}`, `{"op":"ping"}`} {
		if err := ws.WriteMessage(gws.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, p, err := ws.ReadMessage(); err != nil || !strings.Contains(string(p), "pong") {
		t.Fatalf("ping: %s, %v", p, err)
	}
	dev := dialUDPDevice(t, addr, "udp-cross")
	if err := dev.Subscribe("cross/#"); err != nil {
		t.Fatal(err)
	}

	// CoAP -> WebSocket, rudp, Modbus.
	coapRun(t, "-m", "put", "-e", "21.5", "coap://"+addr+"/t/cross/temp")
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		var m struct {
			Topic string          `json:"topic"`
			Data  json.RawMessage `json:"data"`
			Src   string          `json:"src"`
		}
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("WebSocket: %v", err)
		}
		if m.Topic == "cross/temp" {
			if string(m.Data) != "21.5" || m.Src != "coap" {
				t.Fatalf("WebSocket got %s from %q", m.Data, m.Src)
			}
			break
		}
	}
	receive(t, dev, 1, func(_ int, d private.Delivery) {
		if d.Topic != "cross/temp" || string(d.Data) != "21.5" || d.Src != "coap" {
			t.Fatalf("UDP device got %+v", d)
		}
	})
	h := goburrow.NewTCPClientHandler(addr)
	h.SlaveId, h.Timeout = 1, 10*time.Second
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	master := goburrow.NewClient(h)
	if got, err := master.ReadHoldingRegisters(0, 1); err != nil || binary.BigEndian.Uint16(got) != 215 {
		t.Fatalf("Modbus read of the CoAP value: % x, %v; want 215", got, err)
	}

	// rudp, WebSocket, Modbus -> CoAP.
	if err := dev.Publish("cross/from-udp", []byte("7"), true); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteJSON(map[string]any{"op": "pub", "topic": "cross/from-ws", "data": "hello"}); err != nil {
		t.Fatal(err)
	}
	if _, err := master.WriteSingleRegister(10, 42); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]string{"cross/from-udp": "7", "cross/from-ws": "hello", "cross/setpoint": "42"} {
		eventually(t, "CoAP GET of "+topic, func() bool {
			return strings.Contains(coapGetQuiet(t, addr, topic), want)
		})
	}
}

// coapGetQuiet is a CoAP GET of a topic's value; it returns what
// coap-client printed, an error answer (4.04 before the value arrives)
// included.
func coapGetQuiet(t *testing.T, addr, topic string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, requireCoAPClient(t), "-m", "get", "coap://"+addr+"/t/"+topic).CombinedOutput()
	return string(out)
}
