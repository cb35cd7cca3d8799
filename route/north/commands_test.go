package north

import (
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/north/northtest"
	"github.com/edgemux/edgemux/route/routetest"
)

// TestMQTTCommands: a remote publish on a command topic whose bus topic is
// allowed reaches a bus subscriber with src mqtt:<sink>; one whose bus
// topic is not allowed is refused, counted and never reaches the bus; a
// command is not echoed back out through the sink it came in by.
func TestMQTTCommands(t *testing.T) {
	br := northtest.StartMosquitto(t)
	b := bus.New(bus.Options{})
	s := startSink(t, config.NorthSink{Name: "cmd", Kind: "mqtt", URL: br.URL(),
		Map:      []config.NorthMap{{From: "ctl/#", To: "state/{topic}", QoS: 1}},
		Commands: []config.NorthCommand{{From: "edgemux/gw1/cmd/#", To: "{1}"}},
		Allow:    []string{"ctl/#"}}, b, nil)
	waitUp(t, s)
	waitCommandsUp(t, s)
	sub, err := b.NewSubscriber(nil)
	must(t, err)
	must(t, sub.SubscribeLive("#"))
	echo, _ := subscribe(t, br.URL(), "t-echo", "state/#", true, nil)

	_, pub := subscribe(t, br.URL(), "t-cloud", "unused", true, nil)
	send := func(topic, payload string) {
		tok := pub.Publish(topic, 1, false, payload)
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("cloud publish: %v", tok.Error())
		}
	}
	send("edgemux/gw1/cmd/secret/door", "open") // not allowed
	send("edgemux/gw1/cmd/ctl/lamp", "on")      // allowed, after it: the refused one would be there first
	var msgs []bus.Message
	routetest.Eventually(t, "the allowed command on the bus", func() bool {
		msgs = append(msgs, sub.Drain(nil, 0).Msgs...)
		return len(msgs) > 0
	})
	if m := msgs[0]; len(msgs) != 1 || m.Topic != "ctl/lamp" || string(m.Payload) != "on" || m.Src != "mqtt:cmd" {
		t.Fatalf("bus got %+v", msgs)
	}
	// The outcome is counted once the bus has delivered: wait for it.
	routetest.Eventually(t, "the command counted", func() bool { return s.Stats().CommandsWritten == 1 })
	if st := s.Stats(); st.CommandsRefused != 1 || st.CommandsFailed != 0 {
		t.Fatalf("command counters: %+v", st)
	}
	// The command matched the sink's own map (ctl/#) but is not sent back
	// up; a local publish on the same filter is, and arrives after it
	// would have.
	must(t, b.Publish("ctl/fan", []byte("off"), "ws"))
	routetest.Eventually(t, "the local publish upstream", func() bool { return echo.len() == 1 })
	if m := echo.snapshot()[0]; m.Topic() != "state/ctl/fan" {
		t.Fatalf("upstream got %s: a command echoed back", m.Topic())
	}
}

// TestMQTTCommandsUp: CommandsUp says whether a sink's commands are
// subscribed: true once they are, false while the link is down, true
// again after the reconnect; false for a sink without commands.
func TestMQTTCommandsUp(t *testing.T) {
	br := northtest.StartMosquitto(t)
	g := newGate(t, br.Port)
	b := bus.New(bus.Options{})
	s := startSink(t, config.NorthSink{Name: "cmdup", Kind: "mqtt", URL: g.url(),
		Commands: []config.NorthCommand{{From: "edgemux/gw1/cmd/#", To: "{1}"}}, Allow: []string{"ctl/#"}}, b, nil)
	plain := startSink(t, config.NorthSink{Name: "plain", Kind: "mqtt", URL: br.URL(),
		Map: []config.NorthMap{{From: "ctl/#", To: "state/{topic}"}}}, b, nil)
	waitCommandsUp(t, s)
	waitUp(t, plain)
	if plain.Stats().CommandsUp {
		t.Error("a sink without commands says its commands are up")
	}
	g.hold(true)
	g.cut()
	routetest.Eventually(t, "the commands down with the link", func() bool { return !s.Stats().CommandsUp })
	g.hold(false)
	waitCommandsUp(t, s)
}

// waitCommandsUp waits until s's commands are subscribed at its broker.
// A sink reports its link up before it subscribes to its commands, and a
// command published before the broker has that subscription is delivered
// to nobody: a test that sends commands waits for this first.
func waitCommandsUp(t *testing.T, s *Sink) {
	t.Helper()
	routetest.Eventually(t, "sink "+s.name+"'s commands subscribed", func() bool { return s.Stats().CommandsUp })
}
