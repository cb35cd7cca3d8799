package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
	"github.com/edgemux/edgemux/route/north/northtest"
	"github.com/edgemux/edgemux/route/routetest"
)

// TestNorthCommandsDown: a cloud application's MQTT publishes come down
// through the sink: one on an allowed bus topic reaches a WebSocket
// client, one on a polled writable tag is a Modbus write that reaches
// pymodbus, and one whose bus topic is not allowed is refused, counted in
// /metrics and never reaches the bus; the polled values go up meanwhile.
func TestNorthCommandsDown(t *testing.T) {
	dev := upstreamtest.TCPDevice(t, 1)
	br := northtest.StartMosquitto(t)
	g := mbYAMLGateway(t, fmt.Sprintf(`
modbus:
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
north:
  sinks:
    - name: cloud
      kind: mqtt
      url: %s
      map: [{from: "plant/#", to: "up/{topic}", qos: 1, on: change}]
      commands: [{from: "down/#", to: "{1}"}]
      allow: ["plant/sp", "hmi/#"]
`, dev, br.URL()))
	up := northtest.Connect(t, br.URL(), "cloud-sub", "up/#")
	// Its commands subscribed, not only its link up: a command the broker
	// gets before the subscription reaches nobody.
	routetest.Eventually(t, "the sink's commands subscribed", func() bool {
		return strings.Contains(httpGet(t, g, "/metrics"), `edgemux_north_commands_up{sink="cloud"} 1`)
	})
	ws := btWSDial(t, g)
	btWSSub(t, ws, "hmi/#")
	btWSSub(t, ws, "secret/#")

	cloud := northtest.Connect(t, br.URL(), "cloud-app", "")
	cloud.Send(t, "down/secret/door", "open") // not allowed: refused
	cloud.Send(t, "down/hmi/banner", `"hello"`)
	m, err := btWSRead(ws)
	if err != nil || m.Op != "" || m.Topic != "hmi/banner" || string(m.Data) != `"hello"` {
		t.Fatalf("WebSocket got %+v, %v; want hmi/banner first (the refused one never reaches the bus)", m, err)
	}

	cloud.Send(t, "down/plant/sp", "-12.3")
	device := mbMaster(t, dev, 1)
	routetest.Eventually(t, "the write in pymodbus", func() bool {
		b, err := device.ReadHoldingRegisters(10, 1)
		return err == nil && int16(uint16(b[0])<<8|uint16(b[1])) == -123
	})
	routetest.Eventually(t, "the polled value up", func() bool {
		for _, m := range up.Messages() {
			var v struct{ V float64 }
			if m.Topic() == "up/plant/sp" && json.Unmarshal(m.Payload(), &v) == nil && v.V == -12.3 {
				return true
			}
		}
		return false
	})
	routetest.Eventually(t, "the write counted", func() bool {
		return strings.Contains(httpGet(t, g, "/metrics"), `edgemux_north_commands_total{result="written",sink="cloud"} 2`)
	})
	page := httpGet(t, g, "/metrics")
	for _, want := range []string{
		`edgemux_north_commands_total{result="refused",sink="cloud"} 1`,
		`edgemux_north_commands_total{result="failed",sink="cloud"} 0`,
	} {
		if !strings.Contains(page, want+"\n") {
			t.Errorf("no %s in /metrics", want)
		}
	}
	var st Stats
	if err := json.Unmarshal([]byte(httpGet(t, g, "/api/stats")), &st); err != nil || len(st.North) != 1 || st.North[0].CommandsRefused != 1 {
		t.Fatalf("/api/stats north = %+v, %v", st.North, err)
	}
}

// TestNorthMetricsAtZero: a configured sink's series are all there from
// start-up, at zero, its link down while its broker is unreachable.
func TestNorthMetricsAtZero(t *testing.T) {
	cfg := testConfig(t)
	cfg.DataDir = t.TempDir()
	g := mbYAMLGateway(t, `
north:
  sinks:
    - {name: away, kind: mqtt, url: "tcp://127.0.0.1:1", map: [{from: "a/#", to: "b/{1}"}], store: {enabled: true, dir: "`+cfg.DataDir+`"}}
`)
	page := httpGet(t, g, "/metrics")
	for _, name := range []string{"published", "failed", "spooled", "drained", "dropped", "refused"} {
		if !strings.Contains(page, "\nedgemux_north_"+name+`_total{sink="away"} 0`+"\n") {
			t.Errorf("edgemux_north_%s_total missing at zero", name)
		}
	}
	for _, want := range []string{
		`edgemux_north_link_up{sink="away"} 0`, `edgemux_north_queue_records{sink="away"} 0`,
		`edgemux_north_queue_oldest_age_seconds{sink="away"} 0`, `edgemux_north_commands_total{result="refused",sink="away"} 0`,
	} {
		if !strings.Contains(page, "\n"+want+"\n") {
			t.Errorf("no %s at start-up", want)
		}
	}
}

// TestBrowserDashboardNorth: the dashboard shows a row per north sink,
// its link state, its counters and whether its commands are subscribed,
// from /api/stats' north list.
func TestBrowserDashboardNorth(t *testing.T) {
	br := northtest.StartMosquitto(t)
	g := mbYAMLGateway(t, `
north:
  sinks:
    - {name: cloud, kind: mqtt, url: "`+br.URL()+`", map: [{from: "a/#", to: "b/{1}"}], commands: [{from: "down/#", to: "{1}"}], allow: ["x/#"]}
    - {name: "away", kind: mqtt, url: "tcp://127.0.0.1:1", map: [{from: "a/#"}], commands: [{from: "down/#", to: "{1}"}], allow: ["x/#"]}
    - {name: "quiet", kind: mqtt, url: "tcp://127.0.0.1:1", map: [{from: "a/#"}]}
`)
	up := northtest.Connect(t, br.URL(), "dash-sub", "b/#")
	routetest.Eventually(t, "the sink connected", func() bool { return g.north.Stats()[0].LinkUp })
	if err := g.Bus().Publish("a/x", []byte("1"), "ws"); err != nil {
		t.Fatal(err)
	}
	routetest.Eventually(t, "the message up", func() bool { return len(up.Messages()) == 1 })
	page := openDashboard(t, g.Addr().String())
	page.waitTrue("the cloud row up with 1 published, its commands subscribed", `(() => {
		const r = document.querySelector('#north-rows tr[data-sink="cloud"]');
		return !!r && r.cells[1].innerText === "up" && r.cells[2].innerText === "1" &&
			r.cells[10].innerText.startsWith("subscribed · written 0");
	})()`)
	page.waitTrue("the away row down, its commands not subscribed", `(() => {
		const r = document.querySelector('#north-rows tr[data-sink="away"]');
		return !!r && r.cells[1].innerText === "down" && r.cells[8].innerText === "no store" &&
			r.cells[10].innerText.startsWith("not subscribed · written 0");
	})()`)
	page.waitTrue("the quiet row without commands", `(() => {
		const r = document.querySelector('#north-rows tr[data-sink="quiet"]');
		return !!r && r.cells[10].innerText === "none";
	})()`)
}
