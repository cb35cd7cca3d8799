package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/cluster/natstest"
	"github.com/edgemux/edgemux/route/routetest"
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
	routetest.Eventually(t, what, cond)
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

// device stands for B's poller: a write is taken by the device, whose
// new value the poller then publishes as its own; "bad" is refused.
type device struct {
	b      *bus.Bus
	writes chan string
}

func (d *device) Write(topic string, payload []byte, src string, done func(error)) error {
	if string(payload) == "bad" {
		return fmt.Errorf("%w: not a number", bus.ErrWriteValue)
	}
	d.writes <- src + " " + string(payload)
	go func() {
		d.b.Publish(topic, payload, "modbus-poll") // the read-back
		done(nil)
	}()
	return nil
}

// TestRemoteClaimWriteForwarded: a publish on A to a topic B polls is a
// write forwarded to B, whose device takes it; A caches nothing until
// the device's value comes back as B's; a value B refuses is a failed
// write on A, never a value.
func TestRemoteClaimWriteForwarded(t *testing.T) {
	srv := natstest.Start(t)
	busA, busB := newBus(), newBus()
	dev := &device{b: busB, writes: make(chan string, 4)}
	if err := busB.Claim("modbus-poll", []string{"dev/sp"}, dev); err != nil {
		t.Fatal(err)
	}
	lb := join(t, srv, busB, "gw-b", "dev/sp")
	la := join(t, srv, busA, "gw-a")
	outcome := make(chan error, 1)
	if err := busA.PublishDone(nil, "dev/sp", []byte("21"), "ws", func(err error) { outcome <- err }); err != nil {
		t.Fatal(err)
	}
	if got := <-dev.writes; got != "cluster:gw-a 21" {
		t.Fatalf("B's device got %q", got)
	}
	if err := <-outcome; err != nil {
		t.Fatalf("write forwarded to B: %v", err)
	}
	eventually(t, "A has the device's value from B", func() bool {
		m, ok := busA.Get("dev/sp")
		return ok && string(m.Payload) == "21" && m.Src == "cluster:gw-b"
	})
	if err := busA.PublishDone(nil, "dev/sp", []byte("bad"), "ws", func(err error) { outcome <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-outcome; !errors.Is(err, bus.ErrWriteFailed) || !strings.Contains(err.Error(), "not a number") {
		t.Fatalf("refused write: %v, want a failed write with B's words", err)
	}
	if m, _ := busA.Get("dev/sp"); string(m.Payload) != "21" {
		t.Fatalf("A's value after a refused write: %q", m.Payload)
	}
	if a, b := la.Stats(), lb.Stats(); a.Forwarded != 2 || a.ForwardFail != 1 || b.Served != 2 {
		t.Fatalf("A %+v\nB %+v", a, b)
	}
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

// TestDownTopicsBounded: while the link is down the topics owed to the
// cluster are remembered up to MaxPending; the rest are counted as
// dropped, and those remembered are re-sent when it is back.
func TestDownTopicsBounded(t *testing.T) {
	srv := natstest.Start(t)
	busA, busB := newBus(), newBus()
	la, err := Start(busA, Options{URLs: []string{srv.URL()}, GatewayID: "gw-a", Bucket: "edgemux", Prefix: "edgemux", MaxPending: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(la.Close)
	lb := join(t, srv, busB, "gw-b")
	srv.Stop()
	eventually(t, "A sees the link down", func() bool { return !la.Stats().LinkUp })
	for i := range 100 {
		if err := busA.Publish("down/t"+strconv.Itoa(i), []byte("v"), "ws"); err != nil {
			t.Fatal(err)
		}
	}
	// Each message is either dropped from the mirror's queue (16 deep)
	// or taken while down (unsent) and its topic owed, up to 16 topics:
	// 84 lost either way, counted.
	eventually(t, "A counts 84 lost and 16 owed", func() bool {
		st := la.Stats()
		return st.Dropped == 100-16 && st.Unsent >= 16
	})
	srv.Restart()
	eventually(t, "B has the 16 re-sent values", func() bool { return lb.Stats().Received == 16 })
	n := 0
	busB.Retained("down/#", func(bus.Message) bool { n++; return true })
	if n != 16 {
		t.Fatalf("B holds %d of the topics published while down, want 16", n)
	}
}

// TestUserPassword: a server that asks for a user and password takes the
// link with the password read from its file, and refuses a wrong one: the
// start fails.
func TestUserPassword(t *testing.T) {
	srv := natstest.Start(t, "--user", "edge", "--pass", "s3cret")
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	os.WriteFile(good, []byte("s3cret\n"), 0o600)
	os.WriteFile(bad, []byte("nope\n"), 0o600)
	opt := Options{URLs: []string{srv.URL()}, GatewayID: "gw-a", Bucket: "edgemux", Prefix: "edgemux", User: "edge", PasswordFile: good}
	l, err := Start(newBus(), opt)
	if err != nil {
		t.Fatalf("with the password: %v", err)
	}
	l.Close()
	opt.PasswordFile = bad
	if l, err := Start(newBus(), opt); err == nil {
		l.Close()
		t.Fatal("a wrong password joined the cluster")
	}
}
