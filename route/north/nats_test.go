package north

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/routetest"
)

// natsServer is Debian's nats-server with JetStream, on a free port with
// a store dir of the test's; a missing binary fails the test.
type natsServer struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
}

func natsBinary(t *testing.T) string {
	for _, p := range []string{"/usr/sbin/nats-server", "/usr/bin/nats-server"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("nats-server is needed (apt-get install nats-server)")
	return ""
}

func startNATS(t *testing.T) *natsServer {
	s := &natsServer{t: t, port: freePort(t), dir: t.TempDir()}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *natsServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

func (s *natsServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(natsBinary(s.t), "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	routetest.Eventually(s.t, "nats-server listening", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func (s *natsServer) stop() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

func natsSink(t *testing.T, sc config.NorthSink, b *bus.Bus, withStore bool, tweaks ...func(*Sink)) *Sink {
	t.Helper()
	sc.Kind = "nats"
	if withStore {
		sc.Store = config.NorthStore{Enabled: true, Dir: t.TempDir(), DrainRate: 5000}
	}
	sc = sinkConfig(t, sc)
	no, err := natsOptions(sc, "gw1")
	if err != nil {
		t.Fatal(err)
	}
	var store Store
	if withStore {
		if store, err = OpenSpool(sc.Store); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewSink(sc, "gw1", b, NewNATS(no), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tweak := range tweaks {
		tweak(s)
	}
	s.Start()
	t.Cleanup(func() { s.Close() })
	waitUp(t, s)
	return s
}

// natsCollect subscribes to subject and keeps what arrives.
type natsCollect struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (c *natsCollect) all() []*nats.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*nats.Msg(nil), c.msgs...)
}

func natsConnect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestNATSCore: bus topics go out as subjects, level for token; a topic
// NATS cannot carry is refused and counted; commands come back down from
// subscribed subjects behind the allow list.
func TestNATSCore(t *testing.T) {
	srv := startNATS(t)
	b := bus.New(bus.Options{})
	s := natsSink(t, config.NorthSink{Name: "n", URL: srv.url(), Payload: "envelope",
		Map:      []config.NorthMap{{From: "plant/#", To: "site/{gateway}/{topic}", QoS: 1}},
		Commands: []config.NorthCommand{{From: "down/#", To: "{1}"}}, Allow: []string{"ctl/#"}}, b, false)
	waitCommandsUp(t, s)
	nc := natsConnect(t, srv.url())
	got := &natsCollect{}
	if _, err := nc.Subscribe("site.>", func(m *nats.Msg) { got.mu.Lock(); got.msgs = append(got.msgs, m); got.mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	must(t, b.Publish("plant/a.b/temp", []byte("1"), "ws")) // a "." in a level: no subject for it
	must(t, b.Publish("plant/a/temp", []byte("21.5"), "ws"))
	routetest.Eventually(t, "the message on its subject", func() bool { return len(got.all()) == 1 })
	if m := got.all()[0]; m.Subject != "site.gw1.plant.a.temp" || !strings.Contains(string(m.Data), `"v":21.5`) {
		t.Fatalf("got %s %s", m.Subject, m.Data)
	}
	routetest.Eventually(t, "the publish counted", func() bool { return s.Stats().Published == 1 })
	if st := s.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v: want the unmappable topic dropped", st)
	}

	sub, err := b.NewSubscriber(nil)
	must(t, err)
	must(t, sub.SubscribeLive("#"))
	must(t, nc.Publish("down.secret.door", []byte("open")))
	must(t, nc.Publish("down.ctl.lamp", []byte("on")))
	var msgs []bus.Message
	routetest.Eventually(t, "the command on the bus", func() bool { msgs = append(msgs, sub.Drain(nil, 0).Msgs...); return len(msgs) > 0 })
	if m := msgs[0]; m.Topic != "ctl/lamp" || string(m.Payload) != "on" || m.Src != "nats:n" {
		t.Fatalf("bus got %+v", msgs)
	}
	routetest.Eventually(t, "the command counted", func() bool { return s.Stats().CommandsWritten == 1 })
	if st := s.Stats(); st.CommandsRefused != 1 {
		t.Fatalf("command counters %+v", st)
	}
}

// TestNATSJetStreamRestart: with JetStream every publish waits for the
// stream's ack; the server killed and restarted mid-stream (its store on
// disk) loses nothing: every message is in the stream afterwards.
func TestNATSJetStreamRestart(t *testing.T) {
	const before, during, after = 500, 1500, 500
	srv := startNATS(t)
	nc := natsConnect(t, srv.url())
	js, err := jetstream.New(nc)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "EDGE", Subjects: []string{"out.>"}, Storage: jetstream.FileStorage})
	must(t, err)
	nc.Close()

	b := bus.New(bus.Options{})
	s := natsSink(t, config.NorthSink{Name: "js", URL: srv.url(), JetStream: config.NorthJetStream{Stream: "EDGE"},
		Map: []config.NorthMap{{From: "s/#", To: "out/{topic}", QoS: 1}}}, b, true)
	publishRange(t, b, 0, before)
	routetest.Eventually(t, "the first part acked", func() bool { return s.Stats().Published == before })
	srv.stop()
	routetest.Eventually(t, "the link down", func() bool { return !s.Stats().LinkUp })
	publishRange(t, b, before, before+during)
	routetest.Eventually(t, "the backlog on disk", func() bool { return s.Stats().QueueRecords == during })
	srv.start()
	publishRange(t, b, before+during, before+during+after)
	total := before + during + after
	routetest.Eventually(t, "the queue drained", func() bool { st := s.Stats(); return st.LinkUp && st.QueueRecords == 0 })

	nc = natsConnect(t, srv.url())
	js, err = jetstream.New(nc)
	must(t, err)
	cons, err := js.OrderedConsumer(ctx, "EDGE", jetstream.OrderedConsumerConfig{})
	must(t, err)
	seen, stored := map[string]bool{}, 0
	for len(seen) < total {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		must(t, err)
		n := 0
		for m := range batch.Messages() {
			seen[string(m.Data())] = true
			stored++
			n++
		}
		if n == 0 {
			break
		}
	}
	if len(seen) != total {
		t.Fatalf("the stream holds %d distinct messages of %d", len(seen), total)
	}
	t.Logf("%d messages, %d stored (duplicates are resends of publishes whose ack the restart lost), stats %+v", total, stored, s.Stats())
}
