package gateway

// The last-value cache through the real gateway: a full cache refuses new
// topics to their publishers in each protocol's words while the topics
// the configuration serves keep their values, one connection cannot fill
// it, and a Modbus tag without a value is an exception, never a zero.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"

	goburrow "github.com/goburrow/modbus"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

// btMaster connects a goburrow Modbus master to the gateway.
func btMaster(t *testing.T, g *Gateway) goburrow.Client {
	t.Helper()
	h := goburrow.NewTCPClientHandler(g.Addr().String())
	h.SlaveId, h.Timeout = 1, rbIOTimeout
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return goburrow.NewClient(h)
}

// btException is the Modbus exception code in err, 0 if none.
func btException(err error) byte {
	var me *goburrow.ModbusError
	if errors.As(err, &me) {
		return me.ExceptionCode
	}
	return 0
}

// btReadHolding reads one holding register.
func btReadHolding(t *testing.T, m goburrow.Client, addr uint16) (uint16, error) {
	t.Helper()
	b, err := m.ReadHoldingRegisters(addr, 1)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(b), nil
}

// btPubAck publishes with a msg id and returns the ACK's status.
func btPubAck(t *testing.T, c *btConn, id uint32, topic, data string) private.Code {
	t.Helper()
	btWrite(t, c.c, rbPubFrame(id, topic, []byte(data)))
	a, err := c.r.ack()
	if err != nil || a.MsgID != id {
		t.Fatalf("PUB %s: ACK %+v, %v", topic, a, err)
	}
	return a.Status
}

// btConn is a private connection with its frame reader.
type btConn struct {
	c net.Conn
	r *btReader
}

func btDevice(t *testing.T, addr, device string) *btConn {
	t.Helper()
	c := btHello(t, addr, device)
	return &btConn{c: c, r: btNewReader(c)}
}

// TestFullCacheRefusesAndKeepsServedTopics: the cache is full (bus.max_topics
// reached by junk topics). A device's setpoint, a Modbus tag, still keeps
// its value: masters read it, write it and read the write back, and a new
// subscriber gets it retained. A new topic is refused to its publisher:
// private ACK CACHE_FULL, WebSocket error cache-full; and counted.
func TestFullCacheRefusesAndKeepsServedTopics(t *testing.T) {
	const maxTopics = 1000
	cfg := rbConfig(t)
	cfg.Bus.MaxTopics = maxTopics
	cfg.Modbus.Tags = []config.ModbusTag{
		{Topic: "plant/line1/setpoint", Table: "holding", Address: 0, Type: "uint16", Writable: true},
	}
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()
	for i := 0; g.Bus().Stats().Topics < maxTopics; i++ {
		if i > 2*maxTopics {
			t.Fatalf("cache never filled: %+v", g.Bus().Stats())
		}
		g.Bus().Publish("junk/"+strconv.Itoa(i), []byte("x"), "test")
	}

	device := btDevice(t, addr, "plc-1")
	if st := btPubAck(t, device, 1, "plant/line1/setpoint", "42"); st != private.CodeOK {
		t.Fatalf("setpoint publish refused: %v", st)
	}
	master := btMaster(t, g)
	if v, err := btReadHolding(t, master, 0); err != nil || v != 42 {
		t.Fatalf("master read %d, %v; want 42", v, err)
	}
	if _, err := master.WriteSingleRegister(0, 1234); err != nil {
		t.Fatalf("FC6 write: %v", err)
	}
	if v, err := btReadHolding(t, master, 0); err != nil || v != 1234 {
		t.Fatalf("read back %d, %v; want 1234", v, err)
	}
	late := btDevice(t, addr, "late")
	btWrite(t, late.c, rbSubFrame(2, "plant/line1/setpoint"))
	if a, err := late.r.ack(); err != nil || a.Status != private.CodeOK {
		t.Fatalf("SUB: %+v %v", a, err)
	}
	f, err := late.r.next()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := private.DecodePub(f.Payload); err != nil || string(m.Data) != "1234" || m.Flags&private.PubRetained == 0 {
		t.Fatalf("late subscriber got %v %q, want the retained 1234", f.Type, m.Data)
	}

	if st := btPubAck(t, device, 3, "junk/new", "1"); st != private.CodeCacheFull {
		t.Fatalf("new topic in a full cache: ACK status %v, want CACHE_FULL", st)
	}
	if _, ok := g.Bus().Get("junk/new"); ok {
		t.Fatal("the refused topic was cached")
	}
	ws := btWSDial(t, g)
	if err := ws.WriteJSON(map[string]any{"op": "pub", "topic": "junk/ws", "data": 1}); err != nil {
		t.Fatal(err)
	}
	if m, err := btWSRead(ws); err != nil || m.Op != "error" || m.Code != "cache-full" {
		t.Fatalf("WebSocket pub to a full cache: %+v, %v; want error cache-full", m, err)
	}
	if n := g.Bus().Stats().CacheFull; n < 2 {
		t.Fatalf("bus counted %d refusals, want at least 2", n)
	}
	if v := metric(httpGet(t, g, "/metrics"), `edgemux_bus_messages_total{event="cache_full"}`); v == "" || v == "0" {
		t.Fatalf("/metrics cache_full = %q", v)
	}
}

// TestTopicQuotaPerConnection: one connection may add bus.topic_quota new
// topics (default 1000) and no more; it may still publish to topics that
// exist, and other connections may still add theirs. Private and
// WebSocket alike.
func TestTopicQuotaPerConnection(t *testing.T) {
	cfg := rbConfig(t)
	g := startGateway(t, cfg, Options{})
	quota := g.Bus().Options().TopicQuota
	if quota != 1000 {
		t.Fatalf("default topic quota %d, want 1000", quota)
	}
	addr := g.Addr().String()

	dev := btDevice(t, addr, "greedy")
	var flood []byte
	for i := range quota - 1 {
		flood = append(flood, rbPubFrame(0, fmt.Sprintf("q/p/%d", i), []byte("v"))...)
	}
	btWrite(t, dev.c, flood)
	if st := btPubAck(t, dev, 1, "q/p/last", "v"); st != private.CodeOK {
		t.Fatalf("topic %d of the quota refused: %v", quota, st)
	}
	if st := btPubAck(t, dev, 2, "q/p/over", "v"); st != private.CodeTopicQuota {
		t.Fatalf("topic past the quota: ACK %v, want TOPIC_QUOTA", st)
	}
	if st := btPubAck(t, dev, 3, "q/p/0", "again"); st != private.CodeOK {
		t.Fatalf("republishing its own topic: %v", st)
	}
	other := btDevice(t, addr, "other")
	if st := btPubAck(t, other, 4, "q/p/over", "v"); st != private.CodeOK {
		t.Fatalf("another device's new topic: %v", st)
	}

	ws := btWSDial(t, g)
	var wsFlood []byte
	for i := range quota {
		wsFlood = append(wsFlood, btWSFrame(fmt.Appendf(nil, `{"op":"pub","topic":"q/ws/%d","data":1}`, i))...)
	}
	wsFlood = append(wsFlood, btWSFrame([]byte(`{"op":"pub","topic":"q/ws/over","data":1}`))...)
	if _, err := ws.NetConn().Write(wsFlood); err != nil {
		t.Fatal(err)
	}
	if m, err := btWSRead(ws); err != nil || m.Op != "error" || m.Code != "topic-quota" {
		t.Fatalf("WebSocket pub past the quota: %+v, %v; want error topic-quota", m, err)
	}
	if _, ok := g.Bus().Get("q/ws/over"); ok {
		t.Fatal("the topic past the quota was cached")
	}
	if n := g.Bus().Stats().OverQuota; n != 2 {
		t.Fatalf("bus counted %d quota refusals, want 2", n)
	}
}

// TestModbusTagWithoutValue: a master reading a mapped tag that was never
// published gets exception 0x0B (gateway target failed to respond), not
// 0; once published it reads the value. modbus.no_value: zero restores 0.
func TestModbusTagWithoutValue(t *testing.T) {
	tags := []config.ModbusTag{
		{Topic: "mb/level", Table: "holding", Address: 0, Type: "uint16"},
		{Topic: "mb/pump", Table: "coil", Address: 0, Type: "bool"},
	}
	cfg := rbConfig(t)
	cfg.Modbus.Tags = tags
	g := startGateway(t, cfg, Options{})
	master := btMaster(t, g)
	if v, err := btReadHolding(t, master, 0); btException(err) != 0x0B {
		t.Fatalf("read of a tag never published: %d, %v; want exception 0x0B", v, err)
	}
	if b, err := master.ReadCoils(0, 1); btException(err) != 0x0B {
		t.Fatalf("coil never published: % x, %v; want exception 0x0B", b, err)
	}
	if err := g.Bus().Publish("mb/level", []byte("17"), "test"); err != nil {
		t.Fatal(err)
	}
	if v, err := btReadHolding(t, master, 0); err != nil || v != 17 {
		t.Fatalf("read after publish: %d, %v", v, err)
	}

	cfg = rbConfig(t)
	cfg.Modbus.Tags = tags
	cfg.Modbus.NoValue = "zero"
	g = startGateway(t, cfg, Options{})
	if v, err := btReadHolding(t, btMaster(t, g), 0); err != nil || v != 0 {
		t.Fatalf("no_value zero: %d, %v; want 0", v, err)
	}
}

// TestReloadReservesTheNewMap: the tags of a reloaded register map are
// reserved on the bus; those no longer mapped are released.
func TestReloadReservesTheNewMap(t *testing.T) {
	cfg := rbConfig(t)
	cfg.Modbus.Tags = []config.ModbusTag{{Topic: "mb/old", Table: "holding", Address: 0, Type: "uint16"}}
	g := startGateway(t, cfg, Options{})
	if !g.Bus().Reserved("mb/old") || !g.Bus().Reserved(StatsTopic) {
		t.Fatal("the map's tag or the stats topic is not reserved")
	}
	next := cfg
	next.Modbus.Tags = []config.ModbusTag{{Topic: "mb/new", Table: "holding", Address: 0, Type: "uint16"}}
	if err := g.Reload(next); err != nil {
		t.Fatal(err)
	}
	if g.Bus().Reserved("mb/old") || !g.Bus().Reserved("mb/new") {
		t.Fatal("Reload did not move the reservation to the new map")
	}
}
