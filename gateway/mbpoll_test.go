package gateway

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
)

// TestModbusPollFromYAML: a configuration's text with two polled devices,
// pymodbus over Modbus TCP and over RTU on a socat pty pair; their tags,
// decoded (a uint32, a scaled and offset int16, coils, a discrete input),
// reach a WebSocket subscriber good; the poll counters are in /api/stats
// and /metrics, those with nothing to count present at zero.
func TestModbusPollFromYAML(t *testing.T) {
	tcpDev := upstreamtest.TCPDevice(t, 1)
	rtuPath := upstreamtest.RTUDevice(t, 19200, 5)
	g := mbYAMLGateway(t, fmt.Sprintf(`
modbus:
  upstream:
    lines:
      - {name: plc, kind: tcp, address: "%s"}
      - {name: bus, kind: rtu, address: "%s", baud: 19200, parity: N}
    devices:
      - name: plc1
        line: plc
        unit_id: 1
        timeout: 5s
        poll:
          interval: 50ms
          tags:
            - {topic: yaml/plc/h1, table: holding, address: 1, type: uint32}
            - {topic: yaml/plc/in5, table: input, address: 5, type: int16, scale: 0.5, offset: -1}
            - {topic: yaml/plc/c3, table: coil, address: 3, type: bool}
      - name: meter5
        line: bus
        unit_id: 5
        timeout: 2s
        retries: 3
        poll:
          interval: 50ms
          on_change: true
          tags:
            - {topic: yaml/meter/h2, table: holding, address: 2, type: uint16}
            - {topic: yaml/meter/d0, table: discrete, address: 0, type: bool}
`, tcpDev, rtuPath))
	ws := btWSDial(t, g)
	btWSSub(t, ws, "yaml/#")
	want := map[string]any{"yaml/plc/h1": float64(1001<<16 | 1002), "yaml/plc/in5": 2005*0.5 - 1, "yaml/plc/c3": true,
		"yaml/meter/h2": 1002.0, "yaml/meter/d0": true}
	seen := map[string]mbValue{}
	for len(seen) < len(want) {
		m, err := btWSRead(ws)
		if err != nil {
			t.Fatalf("waiting for %d polled tags, seen %v: %v", len(want), seen, err)
		}
		var v mbValue
		if m.Topic == "" { // not a delivery
			continue
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatalf("%s: %s: %v", m.Topic, m.Data, err)
		}
		if v.Q == "good" {
			seen[m.Topic] = v
		}
	}
	for topic, v := range want {
		if seen[topic].V != v {
			t.Errorf("%s: %+v, want %v good", topic, seen[topic], v)
		}
	}

	// A cycle is counted when its last read's tags are published: the
	// last value can reach the client before the counts move.
	var last string
	eventually(t, "every device's first poll counted in /api/stats", func() bool {
		var stats struct {
			Devices []ModbusDevice `json:"modbus_devices"`
		}
		body := httpGet(t, g, "/api/stats")
		if err := json.Unmarshal([]byte(body), &stats); err != nil {
			t.Fatal(err)
		}
		counted := len(stats.Devices) == 2
		for _, d := range stats.Devices {
			if d.Poll == nil || d.Poll.Counts["polls"] == 0 || d.Poll.Counts["published"] == 0 || d.Poll.LastPollMs == 0 {
				counted = false
				if s := fmt.Sprintf("%s: %+v", d.Name, d.Poll); s != last {
					last = s
					t.Logf("/api/stats device %s", s)
				}
			}
		}
		return counted
	})
	m := httpGet(t, g, "/metrics")
	for _, dev := range []string{`device="plc1",event="%s",line="plc"`, `device="meter5",event="%s",line="bus"`} {
		for _, zero := range []string{"writes", "writes_ok", "writes_failed", "decode_errors", "read_refused"} {
			if v := metric(m, "edgemux_modbus_poll_total{"+fmt.Sprintf(dev, zero)+"}"); v != "0" {
				t.Errorf("%s %s in /metrics: %q, want 0", dev, zero, v)
			}
		}
		if v, _ := strconv.ParseFloat(metric(m, "edgemux_modbus_poll_total{"+fmt.Sprintf(dev, "polls")+"}"), 64); v < 1 {
			t.Errorf("%s polls in /metrics: %v", dev, v)
		}
	}
	if v, _ := strconv.ParseFloat(metric(m, `edgemux_modbus_poll_last_seconds{device="plc1",line="plc"}`), 64); v < 1.7e9 {
		t.Errorf("last poll time in /metrics: %v", v)
	}
}
