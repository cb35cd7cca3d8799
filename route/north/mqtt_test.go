package north

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/north/northtest"
	"github.com/edgemux/edgemux/route/routetest"
)

// sinkConfig normalizes and validates sc as the config package would.
func sinkConfig(t *testing.T, sc config.NorthSink) config.NorthSink {
	t.Helper()
	c := config.Defaults()
	c.DataDir = t.TempDir()
	c.North.Sinks = []config.NorthSink{sc}
	c.Normalize()
	if err := c.Validate(); err != nil {
		t.Fatalf("sink config: %v", err)
	}
	return c.North.Sinks[0]
}

// startSink builds and starts an MQTT sink, closed in t.Cleanup; tweaks
// run before its start (a small live lane, say).
func startSink(t *testing.T, sc config.NorthSink, b *bus.Bus, store Store, tweaks ...func(*Sink)) *Sink {
	t.Helper()
	sc = sinkConfig(t, sc)
	mo, err := mqttOptions(sc, "gw1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSink(sc, "gw1", b, NewMQTT(mo), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tweak := range tweaks {
		tweak(s)
	}
	s.Start()
	t.Cleanup(func() { s.Close() })
	return s
}

func waitUp(t *testing.T, s *Sink) {
	t.Helper()
	routetest.Eventually(t, "sink "+s.name+" connected", func() bool { return s.Stats().LinkUp })
}

func payloads(ms []mqtt.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Topic() + "=" + string(m.Payload())
	}
	return out
}

// TestMQTTRawAndEnvelope: a bus publish reaches a subscriber on the mapped
// topic, raw from one sink and in an envelope from another, at QoS 1, and
// the retained one is there for a subscriber that comes later.
func TestMQTTRawAndEnvelope(t *testing.T) {
	br := northtest.StartMosquitto(t)
	b := bus.New(bus.Options{})
	raw := startSink(t, config.NorthSink{Name: "raw", Kind: "mqtt", URL: br.URL(),
		Map: []config.NorthMap{{From: "plant/+/temp", To: "site/{gateway}/{1}/t", QoS: 1, Retain: true}}}, b, nil)
	env := startSink(t, config.NorthSink{Name: "env", Kind: "mqtt", URL: br.URL(), Payload: "envelope",
		Map: []config.NorthMap{{From: "plant/#", To: "env/{topic}", QoS: 1}}}, b, nil)
	waitUp(t, raw)
	waitUp(t, env)
	got, _ := subscribe(t, br.URL(), "t-sub", "#", true, nil)

	must(t, b.Publish("plant/a/temp", []byte("21.5"), "ws"))
	must(t, b.Publish("plant/b/temp", []byte(`{"v":7,"q":"bad","ts":1700000000000}`), "modbus-poll"))
	must(t, b.Publish("plant/c/name", []byte("pump \"3\""), "coap"))
	routetest.Eventually(t, "5 messages", func() bool { return got.len() >= 5 })

	byTopic := map[string]mqtt.Message{}
	for _, m := range got.snapshot() {
		byTopic[m.Topic()] = m
		if m.Qos() != 1 {
			t.Errorf("%s arrived at QoS %d, want 1", m.Topic(), m.Qos())
		}
	}
	if m := byTopic["site/gw1/a/t"]; m == nil || string(m.Payload()) != "21.5" {
		t.Fatalf("raw: got %v", payloads(got.snapshot()))
	}
	checkEnvelope(t, byTopic["env/plant/a/temp"], 21.5, "ws", "good")
	checkEnvelope(t, byTopic["env/plant/b/temp"], float64(7), "modbus-poll", "bad")
	checkEnvelope(t, byTopic["env/plant/c/name"], `pump "3"`, "coap", "good")
	if ts := envelopeOf(t, byTopic["env/plant/b/temp"])["ts"]; ts != float64(1700000000000) {
		t.Errorf("a poller's ts is the envelope's: got %v", ts)
	}

	late, _ := subscribe(t, br.URL(), "t-late", "site/gw1/a/#", true, nil)
	routetest.Eventually(t, "the retained value", func() bool { return late.len() == 1 })
	if m := late.snapshot()[0]; !m.Retained() || string(m.Payload()) != "21.5" {
		t.Fatalf("late subscriber got %q retained=%v", m.Payload(), m.Retained())
	}
	routetest.Eventually(t, "the acks counted", func() bool { return raw.Stats().Published == 2 })
	if st := raw.Stats(); st.Failed != 0 || st.Dropped != 0 {
		t.Fatalf("raw sink stats = %+v", st)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func envelopeOf(t *testing.T, m mqtt.Message) map[string]any {
	t.Helper()
	if m == nil {
		t.Fatal("envelope message missing")
	}
	var e map[string]any
	if err := json.Unmarshal(m.Payload(), &e); err != nil {
		t.Fatalf("envelope %q: %v", m.Payload(), err)
	}
	return e
}

func checkEnvelope(t *testing.T, m mqtt.Message, v any, src, q string) {
	t.Helper()
	e := envelopeOf(t, m)
	if e["v"] != v || e["src"] != src || e["q"] != q || e["ts"] == nil || len(e) != 4 {
		t.Errorf("envelope %s = %s, want v=%v src=%s q=%s", m.Topic(), m.Payload(), v, src, q)
	}
}

// TestMQTTOnChange: a map with on: change sends a topic's payload only
// when it differs from the last sent; on: update sends every one.
func TestMQTTOnChange(t *testing.T) {
	br := northtest.StartMosquitto(t)
	b := bus.New(bus.Options{})
	s := startSink(t, config.NorthSink{Name: "chg", Kind: "mqtt", URL: br.URL(), Map: []config.NorthMap{
		{From: "c/#", To: "chg/{topic}", QoS: 1, On: "change"},
		{From: "c/#", To: "upd/{topic}", QoS: 1}}}, b, nil)
	waitUp(t, s)
	got, _ := subscribe(t, br.URL(), "t-chg", "#", true, nil)
	for _, p := range []string{"1", "1", "1", "2", "2", "1"} {
		must(t, b.Publish("c/x", []byte(p), "ws"))
	}
	must(t, b.Publish("c/end", []byte("end"), "ws"))
	routetest.Eventually(t, "the end marker on both maps", func() bool { return got.len() >= 3+6+2 })
	var chg, upd []string
	for _, m := range got.snapshot() {
		switch {
		case strings.HasPrefix(m.Topic(), "chg/c/x"):
			chg = append(chg, string(m.Payload()))
		case strings.HasPrefix(m.Topic(), "upd/c/x"):
			upd = append(upd, string(m.Payload()))
		}
	}
	if fmt.Sprint(chg) != "[1 2 1]" || len(upd) != 6 {
		t.Fatalf("on change sent %v, on update %v", chg, upd)
	}
	if st := s.Stats(); st.Suppressed != 3 {
		t.Fatalf("suppressed = %d, want 3", st.Suppressed)
	}
}

// startWillSink starts a sink called name to the broker at url (br's,
// or a gate in front of it) with a retained will on gw/{gateway}/state,
// and a subscriber to gw/# on br (client id "t-"+name) that has seen the
// retained "online"; it returns the sink, what the subscriber got and its
// client.
func startWillSink(t *testing.T, br *northtest.Mosquitto, url, name string) (*Sink, *received, mqtt.Client) {
	t.Helper()
	s := startSink(t, config.NorthSink{Name: name, Kind: "mqtt", URL: url, KeepAlive: 1e9 * 5,
		Will: config.NorthWill{Topic: "gw/{gateway}/state", QoS: 1, Retain: true}}, bus.New(bus.Options{}), nil)
	waitUp(t, s)
	got, c := subscribe(t, br.URL(), "t-"+name, "gw/#", true, nil)
	routetest.Eventually(t, "the retained online", func() bool { return got.len() == 1 })
	return s, got, c
}

// TestMQTTWill: the broker publishes the will ("offline") when the
// gateway's connection dies without a DISCONNECT; on reconnect the sink
// announces "online" again, retained.
func TestMQTTWill(t *testing.T) {
	br := northtest.StartMosquitto(t)
	g := newGate(t, br.Port)
	s, got, _ := startWillSink(t, br, g.url(), "will")
	// CI once gave up here after 60 s (qemu-arm, the machine busy with
	// other packages), and it has not come back in runs of this test
	// alone or under load. If it does, this says which step stalled: the
	// will, or the reconnect, or its online message.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("state messages seen: %v; sink link up: %v", payloads(got.snapshot()), s.Stats().LinkUp)
		}
	})
	g.cut() // the gateway's TCP connection dies
	wantOfflineThenOnline(t, got)
	if m := got.snapshot()[0]; !m.Retained() {
		t.Error("the online message was not retained")
	}
}

// wantOfflineThenOnline waits for the state messages that follow a cut
// link: the broker's will, then the sink's online after it reconnected.
func wantOfflineThenOnline(t *testing.T, got *received) {
	t.Helper()
	routetest.Eventually(t, "offline, then online again", func() bool { return got.len() >= 3 })
	if p := payloads(got.snapshot()[:3]); fmt.Sprint(p) != "[gw/gw1/state=online gw/gw1/state=offline gw/gw1/state=online]" {
		t.Fatalf("state messages = %v", p)
	}
}

// TestMQTTLossUnreported: a connection that dies while paho does not
// report it (paho reports a loss only once its own workers have stopped)
// is found by the uplink's own check, and the sink reconnects and says
// it is online again.
func TestMQTTLossUnreported(t *testing.T) {
	testIgnoreLostReports.Store(true)
	t.Cleanup(func() { testIgnoreLostReports.Store(false) })
	br := northtest.StartMosquitto(t)
	g := newGate(t, br.Port)
	_, got, _ := startWillSink(t, br, g.url(), "unreported")
	g.cut()
	wantOfflineThenOnline(t, got)
}

// TestMQTTCloseSendsNoWill: a sink that closes says "offline" itself and
// disconnects cleanly. Its DISCONNECT must reach the broker (the batched
// connection flushes it on paho's close), or the broker publishes the
// will as well: a second "offline" ahead of the marker published after.
func TestMQTTCloseSendsNoWill(t *testing.T) {
	br := northtest.StartMosquitto(t)
	s, got, c := startWillSink(t, br, br.URL(), "bye")
	s.Close()
	if tok := c.Publish("gw/marker", 1, false, "after"); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("marker: %v", tok.Error())
	}
	routetest.Eventually(t, "the marker", func() bool {
		ms := got.snapshot()
		return len(ms) > 0 && ms[len(ms)-1].Topic() == "gw/marker"
	})
	if p := payloads(got.snapshot()); fmt.Sprint(p) != "[gw/gw1/state=online gw/gw1/state=offline gw/marker=after]" {
		t.Fatalf("messages = %v, want online, one offline, the marker", p)
	}
}
