package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/cluster/natstest"
)

// join starts a link for b with id on the server.
func join(t *testing.T, srv *natstest.Server, b *bus.Bus, id string, claims ...string) *Link {
	t.Helper()
	l, err := Start(b, Options{
		URLs: []string{srv.URL()}, GatewayID: id, Bucket: "edgemux", Prefix: "edgemux",
		Memory: false, Claims: claims, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// eventually polls cond until it holds, failing the test after a
// generous deadline (shared 2-core machines: no timed assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// collector drains a live "#" subscriber of b.
type collector struct {
	sub *bus.Subscriber
	got []bus.Message
}

func collect(t *testing.T, b *bus.Bus, filter string) *collector {
	t.Helper()
	sub, err := b.NewSubscriber(nil)
	if err != nil {
		t.Fatal(err)
	}
	sub.SetQueue(1 << 20)
	if err := sub.SubscribeLive(filter); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return &collector{sub: sub}
}

func (c *collector) count() int {
	b := c.sub.Drain(nil, 0)
	c.got = append(c.got, b.Msgs...)
	return len(c.got)
}

func newBus() *bus.Bus { return bus.New(bus.Options{Queue: 1 << 20, QueueBytes: 256 << 20}) }

// TestTwoBusesOrderNoLoopLateJoiner: numbered messages interleaved over
// three topics on A reach B complete and in order per topic, once each;
// A's own subscriber sees each once (nothing comes back); the NATS counts
// match; a third bus joining later loads the last values.
func TestTwoBusesOrderNoLoopLateJoiner(t *testing.T) {
	srv := natstest.Start(t)
	busA, busB := newBus(), newBus()
	la, lb := join(t, srv, busA, "gw-a"), join(t, srv, busB, "gw-b")
	onA, onB := collect(t, busA, "#"), collect(t, busB, "#")
	const n, topics = 3000, 3
	for i := range n {
		topic := fmt.Sprintf("plant/line%d/seq", i%topics)
		if err := busA.Publish(topic, []byte(strconv.Itoa(i)), "ws"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "B has every message", func() bool { return onB.count() >= n })
	last := map[string]int{}
	for _, m := range onB.got {
		i, _ := strconv.Atoi(string(m.Payload))
		if prev, ok := last[m.Topic]; ok && i <= prev {
			t.Fatalf("%s: %d after %d", m.Topic, i, prev)
		}
		last[m.Topic] = i
		if m.Src != "cluster:gw-a" {
			t.Fatalf("src %q", m.Src)
		}
	}
	if onB.count() != n {
		t.Fatalf("B got %d, want %d", onB.count(), n)
	}
	if err := busB.Publish("plant/fromb", []byte("b"), "coap"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A has B's message", func() bool { return onA.count() == n+1 })
	eventually(t, "counters settle", func() bool {
		sa, sb := la.Stats(), lb.Stats()
		return sa.Sent == n && sb.Received == n && sb.Sent == 1 && sa.Received == 1
	})
	// Nothing more arrives: one flush round trip on each link, then
	// the counts are the same.
	la.nc.Flush()
	lb.nc.Flush()
	sa, sb := la.Stats(), lb.Stats()
	if onA.count() != n+1 || onB.count() != n+1 || sa.LoopRejected != 0 || sb.LoopRejected != 0 ||
		sa.Sent != n || sb.Received != n || sb.Sent != 1 || sa.Received != 1 {
		t.Fatalf("after settling: A saw %d, B %d; A %+v; B %+v", onA.count(), onB.count(), sa, sb)
	}

	busC := newBus()
	lc := join(t, srv, busC, "gw-c")
	for i := range topics {
		topic := fmt.Sprintf("plant/line%d/seq", i)
		m, ok := busC.Get(topic)
		want := strconv.Itoa(n - topics + i)
		if !ok || string(m.Payload) != want || m.Src != "cluster:gw-a" {
			t.Errorf("C's %s = %q %q (%v), want %s from cluster:gw-a", topic, m.Payload, m.Src, ok, want)
		}
	}
	if st := lc.Stats(); st.Loaded != topics+1 {
		t.Errorf("C loaded %d values, want %d", st.Loaded, topics+1)
	}
}

// TestDuplicateGatewayID: a second live gateway with the same id is
// refused at start.
func TestDuplicateGatewayID(t *testing.T) {
	srv := natstest.Start(t)
	join(t, srv, newBus(), "same")
	_, err := Start(newBus(), Options{URLs: []string{srv.URL()}, GatewayID: "same", Bucket: "edgemux", Prefix: "edgemux"})
	if !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("second gateway with one id: %v, want ErrDuplicateID", err)
	}
}

// refuseAll stands for a poller's Writer.
type refuseAll struct{}

func (refuseAll) Write(string, []byte, string, func(error)) error { return bus.ErrWriteBusy }

// TestRemoteClaimNotWritable: a topic B polls is refused on A as not
// writable, and A caches nothing for it; B's values reach A as values.
func TestRemoteClaimNotWritable(t *testing.T) {
	srv := natstest.Start(t)
	busA, busB := newBus(), newBus()
	if err := busB.Claim("modbus-poll", []string{"dev/temp"}, refuseAll{}); err != nil {
		t.Fatal(err)
	}
	join(t, srv, busB, "gw-b", "dev/temp")
	join(t, srv, busA, "gw-a")
	err := busA.Publish("dev/temp", []byte("99"), "ws")
	if !errors.Is(err, bus.ErrNotWritable) || !strings.Contains(err.Error(), "gw-b") {
		t.Fatalf("publish on A to B's polled topic: %v, want not writable, naming gw-b", err)
	}
	if m, ok := busA.Get("dev/temp"); ok {
		t.Fatalf("A cached %q for B's device", m.Payload)
	}
	if err := busB.Publish("dev/temp", []byte("21"), "modbus-poll"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A has B's polled value", func() bool {
		m, ok := busA.Get("dev/temp")
		return ok && string(m.Payload) == "21"
	})
}

// TestNATSRestart: with the server down the local bus works and what is
// not mirrored is counted; when it is back the links reconnect, the last
// value published meanwhile is re-sent, and publishing resumes.
func TestNATSRestart(t *testing.T) {
	srv := natstest.Start(t)
	busA, busB := newBus(), newBus()
	la, lb := join(t, srv, busA, "gw-a"), join(t, srv, busB, "gw-b")
	if err := busA.Publish("x/1", []byte("before"), "ws"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B has x/1", func() bool { m, ok := busB.Get("x/1"); return ok && string(m.Payload) == "before" })
	srv.Stop()
	eventually(t, "A sees the link down", func() bool { return !la.Stats().LinkUp })
	for i := range 100 {
		if err := busA.Publish("x/1", []byte("down"+strconv.Itoa(i)), "ws"); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := busA.Get("x/1"); string(m.Payload) != "down99" {
		t.Fatalf("local bus while NATS is down: %q", m.Payload)
	}
	eventually(t, "A counts what it could not mirror", func() bool { return la.Stats().Unsent == 100 })
	srv.Restart()
	eventually(t, "links up again", func() bool { return la.Stats().LinkUp && lb.Stats().LinkUp })
	eventually(t, "B gets the last value published while down", func() bool {
		m, ok := busB.Get("x/1")
		return ok && string(m.Payload) == "down99"
	})
	if err := busA.Publish("x/2", []byte("after"), "ws"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B has x/2", func() bool { m, ok := busB.Get("x/2"); return ok && string(m.Payload) == "after" })
	// Each link read the bucket again; its own values there are not
	// taken for another gateway's with its id.
	eventually(t, "both links caught up", func() bool { return la.Stats().CatchUps > 0 && lb.Stats().CatchUps > 0 })
	if st := la.Stats(); st.Reconnects == 0 || st.Resent == 0 || st.LoopRejected != 0 || st.Received != 0 {
		t.Errorf("A after the restart: %+v", st)
	}
	if st := lb.Stats(); st.LoopRejected != 0 {
		t.Errorf("B after the restart: %+v", st)
	}
}
