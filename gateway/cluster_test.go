package gateway_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goburrow/modbus"
	"github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/gateway"
	"github.com/edgemux/edgemux/gateway/gatewaytest"
	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/cluster/natstest"
	"github.com/edgemux/edgemux/route/routetest"
)

// clusterGateway starts a gateway on cfg (the defaults when nil) in the
// cluster of srv, as id.
func clusterGateway(t *testing.T, srv *natstest.Server, id string, cfg *config.Config) *gateway.Gateway {
	t.Helper()
	c := gatewaytest.Defaults(t)
	if cfg != nil {
		c = *cfg
	}
	c.Cluster.Mode, c.Cluster.URLs, c.Cluster.GatewayID = "nats", []string{srv.URL()}, id
	return gatewaytest.Start(t, c)
}

// wsMsg is a delivery or a reply of the WebSocket JSON protocol.
type wsMsg struct {
	Op       string          `json:"op"`
	Topic    string          `json:"topic"`
	Data     json.RawMessage `json:"data"`
	Src      string          `json:"src"`
	Retained bool            `json:"retained"`
}

func wsDial(t *testing.T, g *gateway.Gateway) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+g.Addr().String()+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wsSend(t *testing.T, c *websocket.Conn, v any) {
	t.Helper()
	if err := c.WriteJSON(v); err != nil {
		t.Fatal(err)
	}
}

func wsRead(t *testing.T, c *websocket.Conn) wsMsg {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	var m wsMsg
	if err := c.ReadJSON(&m); err != nil {
		t.Fatalf("websocket read: %v", err)
	}
	return m
}

// wsSubscribe subscribes and waits for the pong that says it is done.
func wsSubscribe(t *testing.T, c *websocket.Conn, filter string) []wsMsg {
	t.Helper()
	wsSend(t, c, map[string]string{"op": "sub", "topic": filter})
	wsSend(t, c, map[string]string{"op": "ping"})
	var before []wsMsg
	for {
		m := wsRead(t, c)
		if m.Op == "pong" {
			return before
		}
		before = append(before, m)
	}
}

// TestClusterTwoGatewaysOverWebSocket: numbered messages published on
// gateway A by a WebSocket client, interleaved over three topics, reach a
// WebSocket subscriber on gateway B complete and in order per topic; a
// subscriber on A sees each once (nothing comes back from B); the
// cluster counters match the messages; a third gateway started afterwards
// gives its subscriber the last values as retained ones.
func TestClusterTwoGatewaysOverWebSocket(t *testing.T) {
	srv := natstest.Start(t)
	ga, gb := clusterGateway(t, srv, "gw-a", nil), clusterGateway(t, srv, "gw-b", nil)
	subB, subA, pub := wsDial(t, gb), wsDial(t, ga), wsDial(t, ga)
	wsSubscribe(t, subB, "plant/#")
	wsSubscribe(t, subA, "plant/#")
	const n, topics = 3000, 3
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range n {
			if err := pub.WriteJSON(map[string]any{"op": "pub", "topic": fmt.Sprintf("plant/l%d/seq", i%topics), "data": i}); err != nil {
				return
			}
		}
	}()
	last := map[string]int{}
	for got := 0; got < n; got++ {
		m := wsRead(t, subB)
		i, err := strconv.Atoi(string(m.Data))
		if m.Topic == "" || err != nil {
			t.Fatalf("B's subscriber got %+v", m)
		}
		if prev, ok := last[m.Topic]; ok && i <= prev {
			t.Fatalf("%s: %d after %d", m.Topic, i, prev)
		}
		last[m.Topic] = i
		if m.Src != "cluster:gw-a" {
			t.Fatalf("src %q, want cluster:gw-a", m.Src)
		}
	}
	for got := 0; got < n; got++ {
		if m := wsRead(t, subA); m.Topic == "" {
			t.Fatalf("A's subscriber got %+v", m)
		}
	}
	// A marker published on A last: on each subscriber, the next message
	// must be the marker, nothing delivered twice or come back before it.
	// pub has one writer at a time: the publisher's goroutine is done.
	<-published
	wsSend(t, pub, map[string]any{"op": "pub", "topic": "plant/end", "data": "end"})
	for _, c := range []*websocket.Conn{subA, subB} {
		if m := wsRead(t, c); m.Topic != "plant/end" {
			t.Fatalf("after %d messages, %+v before the marker", n, m)
		}
	}
	routetest.Eventually(t, "cluster counters with the marker", func() bool {
		a, b := ga.Snapshot().Cluster, gb.Snapshot().Cluster
		return a.Sent == n+1 && b.Received == n+1
	})
	a, b := ga.Snapshot().Cluster, gb.Snapshot().Cluster
	if a.Received != 0 || b.Sent != 0 || a.LoopRejected != 0 || b.LoopRejected != 0 || a.Dropped != 0 || b.Dropped != 0 {
		t.Fatalf("A %+v\nB %+v", a, b)
	}

	gc := clusterGateway(t, srv, "gw-c", nil)
	if v, ok := gc.Bus().Get("plant/l0/seq"); !ok || string(v.Payload) != strconv.Itoa(n-topics) {
		t.Fatalf("C's cache: %q %v", v.Payload, ok)
	}
	subC := wsDial(t, gc)
	retained := wsSubscribe(t, subC, "plant/+/seq")
	for len(retained) < topics {
		retained = append(retained, wsRead(t, subC))
	}
	for _, m := range retained {
		want := n - topics + int(m.Topic[len("plant/l")]-'0')
		if !m.Retained || string(m.Data) != strconv.Itoa(want) {
			t.Errorf("C's retained %s = %s (retained %v), want %d", m.Topic, m.Data, m.Retained, want)
		}
	}
	if v, ok := gc.Bus().Get("plant/l0/seq"); !ok || string(v.Payload) != strconv.Itoa(n-topics) {
		t.Errorf("C's cache: %q %v", v.Payload, ok)
	}
}

// TestClusterModbusRemotePoll: a Modbus master on gateway A reads a tag
// of A's register map that gateway B polls from a pymodbus device, and
// writes it: the write goes to B, whose poller writes the device, and the
// master's response waits for that; A never caches a value the device
// does not have. A write to a tag B polls read-only fails on A in B's
// words.
func TestClusterModbusRemotePoll(t *testing.T) {
	srv := natstest.Start(t)
	dev := upstreamtest.TCPDevice(t, 1)
	cfgB := clusterYAML(t, fmt.Sprintf(`
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
          tags:
            - {topic: site/plc/h2, table: holding, address: 2, type: uint16, writable: true}
            - {topic: site/plc/h3, table: holding, address: 3, type: uint16}
`, dev))
	cfgA := clusterYAML(t, `
modbus:
  tags:
    - {topic: site/plc/h2, table: holding, address: 0, type: uint16, writable: true}
`)
	clusterGateway(t, srv, "gw-b", &cfgB)
	ga := clusterGateway(t, srv, "gw-a", &cfgA)
	h := modbus.NewTCPClientHandler(ga.Addr().String())
	h.Timeout = 10 * time.Second
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	master := modbus.NewClient(h)
	var regs []byte
	routetest.Eventually(t, "A's master reads B's polled register", func() bool {
		var err error
		regs, err = master.ReadHoldingRegisters(0, 1)
		return err == nil
	})
	if got := int(regs[0])<<8 | int(regs[1]); got != 1002 {
		t.Fatalf("A's register 0 = %d, want 1002 (the device's holding register 2)", got)
	}

	if _, err := master.WriteSingleRegister(0, 4321); err != nil {
		t.Fatalf("A's master writing B's polled register: %v", err)
	}
	dh := modbus.NewTCPClientHandler(dev)
	dh.SlaveId = 1
	if err := dh.Connect(); err != nil {
		t.Fatal(err)
	}
	defer dh.Close()
	if b, err := modbus.NewClient(dh).ReadHoldingRegisters(2, 1); err != nil || int(b[0])<<8|int(b[1]) != 4321 {
		t.Fatalf("the device's register 2 after the write: %x, %v; want 4321", b, err)
	}
	routetest.Eventually(t, "A reads the written value back through B's poll", func() bool {
		b, err := master.ReadHoldingRegisters(0, 1)
		return err == nil && int(b[0])<<8|int(b[1]) == 4321
	})

	outcome := make(chan error, 1)
	if err := ga.Bus().PublishDone(nil, "site/plc/h3", []byte("7"), "ws", func(err error) { outcome <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-outcome; !errors.Is(err, bus.ErrWriteFailed) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("write on A to a tag B polls read-only: %v, want a failed write in B's words", err)
	}
	if v, ok := ga.Bus().Get("site/plc/h3"); ok && v.Src != "cluster:gw-b" {
		t.Fatalf("A's value of B's tag: %q from %q", v.Payload, v.Src)
	}
	if st := ga.Snapshot().Cluster; st.Forwarded != 2 || st.ForwardFail != 1 {
		t.Fatalf("A's forwarded writes: %+v", st)
	}
}

// clusterYAML is a config from text over the defaults, on a free port.
func clusterYAML(t *testing.T, text string) config.Config {
	t.Helper()
	c, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	c.Listen, c.Loops = "127.0.0.1:0", 1
	return c
}

// metricValue reads one unlabelled series from g's /metrics.
func metricValue(t *testing.T, g *gateway.Gateway, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + g.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return "absent"
}

// TestClusterMetricsAtZero: without a cluster every cluster series is
// there, at zero.
func TestClusterMetricsAtZero(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Defaults(t))
	for _, name := range []string{"edgemux_cluster_sent_total", "edgemux_cluster_received_total", "edgemux_cluster_dropped_total",
		"edgemux_cluster_loop_rejected_total", "edgemux_cluster_link_up", "edgemux_cluster_kv_loaded", "edgemux_cluster_unsent_total"} {
		if v := metricValue(t, g, name); v != "0" {
			t.Errorf("%s = %s, want 0", name, v)
		}
	}
}

// TestClusterNATSRestart: the NATS server stops while two gateways run:
// A's link metric goes to 0, its bus keeps working and counts what it
// could not mirror; the server comes back: the links reconnect (metric
// 1), B gets the last value published while down, and publishing goes on.
func TestClusterNATSRestart(t *testing.T) {
	srv := natstest.Start(t)
	ga, gb := clusterGateway(t, srv, "gw-a", nil), clusterGateway(t, srv, "gw-b", nil)
	has := func(g *gateway.Gateway, topic, want string) func() bool {
		return func() bool { v, ok := g.Bus().Get(topic); return ok && string(v.Payload) == want }
	}
	if metricValue(t, ga, "edgemux_cluster_link_up") != "1" {
		t.Fatal("link not up at start")
	}
	if err := ga.Bus().Publish("r/x", []byte("1"), "ws"); err != nil {
		t.Fatal(err)
	}
	routetest.Eventually(t, "B has r/x=1", has(gb, "r/x", "1"))
	srv.Stop()
	routetest.Eventually(t, "A's link metric 0", func() bool { return metricValue(t, ga, "edgemux_cluster_link_up") == "0" })
	for i := 2; i <= 50; i++ {
		if err := ga.Bus().Publish("r/x", []byte(strconv.Itoa(i)), "ws"); err != nil {
			t.Fatal(err)
		}
	}
	routetest.Eventually(t, "A counts what it could not mirror", func() bool { return metricValue(t, ga, "edgemux_cluster_unsent_total") == "49" })
	srv.Restart()
	routetest.Eventually(t, "A's link metric 1", func() bool { return metricValue(t, ga, "edgemux_cluster_link_up") == "1" })
	routetest.Eventually(t, "B has the value published while down", has(gb, "r/x", "50"))
	if err := ga.Bus().Publish("r/y", []byte("after"), "ws"); err != nil {
		t.Fatal(err)
	}
	routetest.Eventually(t, "B has r/y", has(gb, "r/y", "after"))
	if metricValue(t, ga, "edgemux_cluster_reconnects_total") == "0" {
		t.Error("no reconnect counted")
	}
}

// TestClusterReloadNeedsRestart: a reload that changes the cluster
// section says it needs a restart (the link is made once, at Run).
func TestClusterReloadNeedsRestart(t *testing.T) {
	cfg := gatewaytest.Defaults(t)
	g := gatewaytest.Start(t, cfg)
	cfg.Cluster.Topics = []string{"plant/#"}
	if err := g.Reload(cfg); !errors.Is(err, gateway.ErrNeedsRestart) || !strings.Contains(err.Error(), "cluster.topics") {
		t.Fatalf("reload of cluster.topics: %v, want needs a restart", err)
	}
}
