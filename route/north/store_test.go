package north

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/north/northtest"
	"github.com/edgemux/edgemux/route/routetest"
)

// storeSink starts an MQTT sink with a spool in a temp dir.
func storeSink(t *testing.T, url string, b *bus.Bus, st config.NorthStore, tweaks ...func(*Sink)) *Sink {
	t.Helper()
	st.Enabled = true
	st.Dir = t.TempDir()
	sc := sinkConfig(t, config.NorthSink{Name: "sf", Kind: "mqtt", URL: url, Store: st,
		Map: []config.NorthMap{{From: "s/#", To: "out/{topic}", QoS: 1}}})
	store, err := OpenSpool(sc.Store)
	if err != nil {
		t.Fatal(err)
	}
	return startSink(t, sc, b, store, tweaks...)
}

// tally counts what a subscriber got by the message number in the
// payload ("n=<i>"): how many distinct, how many duplicates, and whether
// the first arrivals came in order.
func tally(t *testing.T, r *received) (distinct map[int]bool, dups int, inOrder bool) {
	t.Helper()
	distinct, inOrder = map[int]bool{}, true
	last := -1
	for _, m := range r.snapshot() {
		i, err := strconv.Atoi(strings.TrimPrefix(string(m.Payload()), "n="))
		if err != nil {
			t.Fatalf("payload %q", m.Payload())
		}
		if distinct[i] {
			dups++
			continue
		}
		distinct[i] = true
		if i < last {
			inOrder = false
		}
		last = i
	}
	return distinct, dups, inOrder
}

// inOrderBelow reports whether the first arrivals of messages numbered
// below limit came in order.
func inOrderBelow(t *testing.T, r *received, limit int) bool {
	seen, last := map[int]bool{}, -1
	for _, m := range r.snapshot() {
		i, _ := strconv.Atoi(strings.TrimPrefix(string(m.Payload()), "n="))
		if i >= limit || seen[i] {
			continue
		}
		seen[i] = true
		if i < last {
			return false
		}
		last = i
	}
	return true
}

func publishRange(t *testing.T, b *bus.Bus, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := b.Publish("s/"+strconv.Itoa(i%50), []byte("n="+strconv.Itoa(i)), "ws"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMQTTBrokerRestart: messages published on the bus while the broker
// is killed and restarted (same port, persistence off) all reach a QoS 1
// subscriber: the store holds the backlog while the link is down, drains
// it when the link is back, and the metrics show both.
func TestMQTTBrokerRestart(t *testing.T) {
	const before, during, after = 1000, 3000, 1000
	br := northtest.StartMosquitto(t)
	g := newGate(t, br.Port)
	b := bus.New(bus.Options{})
	s := storeSink(t, g.url(), b, config.NorthStore{DrainRate: 2000})
	waitUp(t, s)
	got, _ := subscribe(t, br.URL(), "t-restart", "out/#", true, nil)

	publishRange(t, b, 0, before)
	// A broker without persistence loses what it acknowledged but had not
	// delivered when it dies: that is the broker's guarantee, not ours, so
	// the kill comes once the first part is through.
	routetest.Eventually(t, "the first part delivered", func() bool { d, _, _ := tally(t, got); return len(d) == before })
	// Delivered is not yet acknowledged: a PUBACK still on its way when
	// the broker dies leaves its record queued, and the backlog below is
	// then never exactly the messages published while it was down.
	routetest.Eventually(t, "the first part acknowledged", func() bool { return s.Stats().QueueRecords == 0 })
	br.Stop()
	routetest.Eventually(t, "the link down", func() bool { return !s.Stats().LinkUp })
	publishRange(t, b, before, before+during)
	// The counter follows the append (the queue shows a batch before the
	// forward goroutine has counted it): wait for both.
	routetest.Eventually(t, "the backlog on disk", func() bool {
		st := s.Stats()
		return st.QueueRecords == during && st.Spooled == before+during
	})
	if st := s.Stats(); st.QueueBytes <= 0 || st.OldestAge < 0 {
		t.Fatalf("while down: %+v", st)
	}

	// The subscriber's session died with the broker: it subscribes again
	// before the gateway may reconnect, so it is there for the drain.
	g.hold(true)
	g.cut()
	br.Start()
	subscribeInto(t, got, br.URL(), "t-restart-2", "out/#", true, nil)
	g.hold(false)
	publishRange(t, b, before+during, before+during+after) // live data during the drain
	total := before + during + after
	routetest.Eventually(t, "every message", func() bool { d, _, _ := tally(t, got); return len(d) == total })
	routetest.Eventually(t, "the queue empty", func() bool { return s.Stats().QueueRecords == 0 })
	d, dups, _ := tally(t, got)
	// The store is FIFO: what came before the restart arrives in order
	// (what came after may be live, ahead of the backlog).
	inOrder := inOrderBelow(t, got, before+during)
	for i := range total {
		if !d[i] {
			t.Fatalf("message %d lost", i)
		}
	}
	st := s.Stats()
	t.Logf("%d messages, %d duplicates (QoS 1 resends), stats %+v", total, dups, st)
	if !inOrder {
		t.Error("first arrivals out of order")
	}
	if st.Dropped != 0 || st.Refused != 0 || st.Drained < during || st.Published < uint64(total) {
		t.Fatalf("stats after the drain: %+v", st)
	}
}

// TestMQTTStoreCap: a queue at its cap drops the oldest (policy oldest)
// or refuses the newest (policy refuse), counted either way; what the
// queue kept reaches the broker once the link comes up.
func TestMQTTStoreCap(t *testing.T) {
	const n = 600
	for _, policy := range []string{"oldest", "refuse"} {
		t.Run(policy, func(t *testing.T) {
			br := northtest.StartMosquitto(t)
			g := newGate(t, br.Port)
			g.hold(true) // the link stays down until the queue is full
			b := bus.New(bus.Options{})
			s := storeSink(t, g.url(), b, config.NorthStore{MaxBytes: 1 << 20, Policy: policy, DrainRate: 100000})
			got, _ := subscribe(t, br.URL(), "t-cap-"+policy, "out/#", true, nil)
			pad := strings.Repeat("x", 4096)
			for i := range n {
				must(t, b.Publish("s/a", []byte(fmt.Sprintf("n=%d", i)), "ws"))
				must(t, b.Publish("s/pad", []byte(pad), "ws")) // fills the queue; filtered out below
			}
			routetest.Eventually(t, "every message stored or counted", func() bool {
				st := s.Stats()
				return st.Spooled+st.Refused == 2*n
			})
			st := s.Stats()
			kept := st.QueueRecords
			if st.QueueBytes > 1<<20 {
				t.Fatalf("queue holds %d bytes, cap 1 MiB", st.QueueBytes)
			}
			switch policy {
			case "oldest":
				if st.Dropped == 0 || st.Refused != 0 || kept+int64(st.Dropped) != 2*n {
					t.Fatalf("drop oldest: %+v", st)
				}
			case "refuse":
				if st.Refused == 0 || st.Dropped != 0 || kept+int64(st.Refused) != 2*n {
					t.Fatalf("refuse: %+v", st)
				}
			}
			g.hold(false)
			routetest.Eventually(t, "the queue drained", func() bool { return s.Stats().QueueRecords == 0 })
			routetest.Eventually(t, "everything kept delivered", func() bool { return int64(got.len()) >= kept })
			var nums []int
			for _, m := range got.snapshot() {
				if m.Topic() == "out/s/a" {
					i, _ := strconv.Atoi(strings.TrimPrefix(string(m.Payload()), "n="))
					nums = append(nums, i)
				}
			}
			// Refuse keeps the oldest messages, drop-oldest the newest.
			if policy == "refuse" && nums[0] != 0 || policy == "oldest" && nums[len(nums)-1] != n-1 {
				t.Fatalf("%s kept messages %d..%d", policy, nums[0], nums[len(nums)-1])
			}
		})
	}
}

// TestMQTTLiveAheadOfBacklog: when the link comes back with a backlog,
// the backlog drains at drain_rate while a live message goes out at once:
// it arrives before the backlog is through.
func TestMQTTLiveAheadOfBacklog(t *testing.T) {
	const backlog = 2000
	br := northtest.StartMosquitto(t)
	g := newGate(t, br.Port)
	g.hold(true)
	b := bus.New(bus.Options{})
	s := storeSink(t, g.url(), b, config.NorthStore{DrainRate: 200}) // 2,000 take 9 s and more
	got, _ := subscribe(t, br.URL(), "t-live", "out/#", true, nil)
	publishRange(t, b, 0, backlog)
	routetest.Eventually(t, "the backlog on disk", func() bool { return s.Stats().QueueRecords == backlog })
	g.hold(false)
	routetest.Eventually(t, "the drain under way", func() bool { return s.Stats().Drained > 0 })
	must(t, b.Publish("s/live", []byte("n=live"), "ws"))
	routetest.Eventually(t, "the live message", func() bool {
		for _, m := range got.snapshot() {
			if string(m.Payload()) == "n=live" {
				return true
			}
		}
		return false
	})
	before := 0
	for _, m := range got.snapshot() {
		if string(m.Payload()) == "n=live" {
			break
		}
		before++
	}
	if before >= backlog {
		t.Fatalf("the live message came after the whole backlog (%d messages)", before)
	}
	routetest.Eventually(t, "the backlog through", func() bool { return distinctPayloads(got) == backlog+1 })
	// The live message is confirmed (and leaves the disk) in its turn,
	// after the backlog.
	routetest.Eventually(t, "the queue empty", func() bool { return s.Stats().QueueRecords == 0 })
	if st := s.Stats(); st.Drained != backlog || st.Published != backlog+1 {
		t.Fatalf("stats %+v", st)
	}
}

func distinctPayloads(r *received) int {
	seen := map[string]bool{}
	for _, m := range r.snapshot() {
		seen[string(m.Payload())] = true
	}
	return len(seen)
}

// TestCloseKeepsQueuedInStore: what the bus still holds for a sink when it
// is closed goes into its store, for the next start.
func TestCloseKeepsQueuedInStore(t *testing.T) {
	const n = 500
	b := bus.New(bus.Options{})
	sc := sinkConfig(t, config.NorthSink{Name: "cl", Kind: "mqtt", URL: "tcp://127.0.0.1:1",
		Store: config.NorthStore{Enabled: true, Dir: t.TempDir()}, Map: []config.NorthMap{{From: "s/#", QoS: 1}}})
	store, err := OpenSpool(sc.Store)
	must(t, err)
	mo, err := mqttOptions(sc, "gw1")
	must(t, err)
	s, err := NewSink(sc, "gw1", b, NewMQTT(mo), store, nil)
	must(t, err)
	publishRange(t, b, 0, n) // never started: all of it waits in the bus queue
	must(t, s.Close())
	again, err := OpenSpool(sc.Store)
	must(t, err)
	defer again.Close()
	if st := again.Stats(); st.Records != n {
		t.Fatalf("the store holds %d of the %d queued messages after Close", st.Records, n)
	}
	recs, err := again.Peek(1, 0)
	must(t, err)
	if out, err := decodeRecord(recs[0].Data); err != nil || out.topic != "s/0" || string(out.payload) != "n=0" {
		t.Fatalf("first record %+v, %v", out, err)
	}
}

// TestMQTTStoreOrderLiveFull: with the link up, messages arrive in the
// order they were published even when the live lane is full and some go
// through the drainer instead.
func TestMQTTStoreOrderLiveFull(t *testing.T) {
	const n = 3000
	br := northtest.StartMosquitto(t)
	b := bus.New(bus.Options{})
	s := storeSink(t, br.URL(), b, config.NorthStore{}, func(s *Sink) { s.liveCap = 8 })
	waitUp(t, s)
	got, _ := subscribe(t, br.URL(), "t-ord", "out/#", true, nil)
	publishRange(t, b, 0, n)
	routetest.Eventually(t, "every message", func() bool { return distinctPayloads(got) == n })
	if !inOrderBelow(t, got, n) {
		t.Fatal("messages out of order with the link up")
	}
}
