package north

import (
	"sync"
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
	subscribed := make(chan struct{})
	s := startSink(t, config.NorthSink{Name: "cmd", Kind: "mqtt", URL: br.URL(),
		Map:      []config.NorthMap{{From: "ctl/#", To: "state/{topic}", QoS: 1}},
		Commands: []config.NorthCommand{{From: "edgemux/gw1/cmd/#", To: "{1}"}},
		Allow:    []string{"ctl/#"}}, b, nil, watchSubscribe(subscribed))
	waitUp(t, s)
	waitSubscribed(t, subscribed)
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

// subscribedUplink closes done once its sink's commands are subscribed.
// A sink reports its link up before it subscribes to its commands (onUp),
// and a command published before the broker has that subscription is
// delivered to nobody: a test that sends commands waits for this first.
type subscribedUplink struct {
	Uplink
	once sync.Once
	done chan struct{}
}

func (u *subscribedUplink) Subscribe(filters []string, handler func(topic string, payload []byte)) error {
	err := u.Uplink.Subscribe(filters, handler)
	if err == nil {
		u.once.Do(func() { close(u.done) })
	}
	return err
}

// watchSubscribe is a sink tweak (startSink, natsSink): done is closed
// once the sink's commands are subscribed.
func watchSubscribe(done chan struct{}) func(*Sink) {
	return func(s *Sink) { s.up = &subscribedUplink{Uplink: s.up, done: done} }
}

// waitSubscribed waits for watchSubscribe's done.
func waitSubscribed(t *testing.T, done chan struct{}) {
	t.Helper()
	routetest.Eventually(t, "the commands subscribed", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}
