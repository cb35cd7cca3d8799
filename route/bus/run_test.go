package bus

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"weak"
)

// A queued delivery of a burst to one topic costs its subscriber a
// fraction of a byte: one run (16 bytes) per chain of up to chainBytes,
// not an 8-byte slot per message in a ring that doubled through every
// size on the way (14.4 bytes a delivery before runs, counted with the rings the
// growth left in the pools). 200 publishes to 2,000 subscribers, none
// drained, as the WebSocket fan-out benchmark queues them.
func TestQueuedDeliveryBytes(t *testing.T) {
	const subs, msgs = 2000, 200
	b := newTestBus(t, Options{MaxSubscribers: subs})
	all := make([]*Subscriber, subs)
	for i := range all {
		all[i] = mustSub(t, b, nil, "bench/#")
	}
	mustPublish(t, b, "bench/ready", "x") // the cache entry and every subscriber's first ring
	drainEvery(all)
	runtime.GC() // the rings the warm-up pooled go to the victim cache, then away
	before := heapInUse()
	payload := []byte(`{"seq":123,"pad":"xxxxxxxxxxxxxxxxxxxxxxxx"}`)
	for range msgs {
		if err := b.Publish("bench/fan", payload, "test"); err != nil {
			t.Fatal(err)
		}
	}
	grew := heapInUse() - before
	perDelivery := float64(grew) / (subs * msgs)
	t.Logf("%d queued deliveries hold %d bytes: %.2f a delivery", subs*msgs, grew, perDelivery)
	if perDelivery > 1 {
		t.Errorf("a queued delivery holds %.2f bytes, want at most 1", perDelivery)
	}
	for _, s := range all {
		if got := s.Drain(nil, 0).Msgs; len(got) != msgs || got[msgs-1].Topic != "bench/fan" {
			t.Fatalf("a subscriber drained %d messages, want %d", len(got), msgs)
		}
	}
	runtime.KeepAlive(all)
}

// A chain ends at chainBytes: a burst queues one run per chain, and a run
// never spans more.
func TestRunsPerChain(t *testing.T) {
	b := newTestBus(t, Options{})
	s1, s2 := mustSub(t, b, nil, "c"), mustSub(t, b, nil, "c")
	payload := make([]byte, 920) // 1,001 bytes counted: 16 a chain
	const msgs = 100
	for range msgs {
		if err := b.Publish("c", payload, "test"); err != nil {
			t.Fatal(err)
		}
	}
	perChain := chainBytes / (msgOverhead + len("c") + len(payload))
	want := (msgs + perChain - 1) / perChain
	for _, s := range []*Subscriber{s1, s2} {
		s.mu.Lock()
		runs, n := int(s.runs), int(s.n)
		s.mu.Unlock()
		if runs != want || n != msgs {
			t.Fatalf("%d messages in %d runs, want %d in %d (%d a chain)", n, runs, msgs, want, perChain)
		}
	}
}

// Runs keep every subscriber's stream exact: interleaved topics, filters
// that take some of them, drains of any size that stop inside a run, and
// a small queue whose oldest messages go (from inside a run too).
func TestRunsKeepOrder(t *testing.T) {
	const queue = 7
	b := newTestBus(t, Options{Queue: 1 << 10})
	all := mustSub(t, b, nil, "#")
	onlyA := mustSub(t, b, nil, "a")
	small := mustSub(t, b, nil, "#")
	small.SetQueue(queue)
	var wantAll, wantA []string
	var gotAll, gotA []string
	take := func(s *Subscriber, got []string, budget int) []string {
		for _, m := range s.Drain(nil, budget).Msgs {
			got = append(got, m.Topic+"="+string(m.Payload))
		}
		return got
	}
	for i := range 600 {
		topic := "a"
		if i%7 == 3 || i%11 == 5 {
			topic = "b"
		}
		mustPublish(t, b, topic, strconv.Itoa(i))
		wantAll = append(wantAll, topic+"="+strconv.Itoa(i))
		if topic == "a" {
			wantA = append(wantA, topic+"="+strconv.Itoa(i))
		}
		if i%13 == 12 { // a budget of 1 to 4 messages of about 83 bytes
			gotAll = take(all, gotAll, (i%4+1)*83)
			gotA = take(onlyA, gotA, (i%3+1)*83)
		}
	}
	gotAll, gotA = take(all, gotAll, 0), take(onlyA, gotA, 0)
	if !equalStrings(gotAll, wantAll) {
		t.Errorf("# got %d messages, want %d in order: first difference %s", len(gotAll), len(wantAll), firstDiff(gotAll, wantAll))
	}
	if !equalStrings(gotA, wantA) {
		t.Errorf("a got %d messages, want %d in order: first difference %s", len(gotA), len(wantA), firstDiff(gotA, wantA))
	}
	gotSmall := take(small, nil, 0)
	if !equalStrings(gotSmall, wantAll[len(wantAll)-queue:]) || small.Dropped() != uint64(len(wantAll)-queue) {
		t.Errorf("a queue of %d kept %v, dropped %d; want the newest %d", queue, gotSmall, small.Dropped(), queue)
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: %s, want %s", i, got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}

// Publishers on one topic at once, subscribers draining meanwhile: each
// subscriber gets every message once and each publisher's in its order,
// whatever order the fan-outs reached the queues in (run with -race).
func TestRunsConcurrentPublishers(t *testing.T) {
	const publishers, perPublisher, subscribers = 4, 2000, 3
	b := New(Options{Queue: publishers * perPublisher})
	var subs []*drained
	for range subscribers {
		subs = append(subs, newDrained(t, b, "same"))
	}
	done := make(chan struct{})
	drainers := startDrainers(subs, done)
	var workers sync.WaitGroup
	startPublishers(t, b, &workers, publishers, perPublisher, func(p, i int) (string, []byte) {
		return "same", []byte(fmt.Sprintf("%d/%d", p, i))
	})
	workers.Wait()
	close(done)
	drainers.Wait()
	for n, d := range subs {
		next := make([]int, publishers)
		for _, m := range d.got {
			p, i, _ := strings.Cut(string(m.Payload), "/")
			pi, _ := strconv.Atoi(p)
			ii, _ := strconv.Atoi(i)
			if ii != next[pi] {
				t.Fatalf("subscriber %d: publisher %d's message %d where %d was next", n, pi, ii, next[pi])
			}
			next[pi]++
		}
		if len(d.got) != publishers*perPublisher || d.sub.Dropped() != 0 {
			t.Fatalf("subscriber %d got %d of %d, dropped %d", n, len(d.got), publishers*perPublisher, d.sub.Dropped())
		}
	}
}

// A chain pins nothing once its messages are drained: the cache keeps the
// topic's last chained message behind a weak pointer only.
func TestDrainedChainIsCollected(t *testing.T) {
	b := newTestBus(t, Options{})
	s1, s2 := mustSub(t, b, nil, "w"), mustSub(t, b, nil, "w")
	mustPublish(t, b, "w", "one")
	mustPublish(t, b, "w", "two")
	s1.mu.Lock()
	first, last := weak.Make(s1.ring[s1.head].first), weak.Make(s1.ring[s1.head].last)
	runs := s1.runs
	s1.mu.Unlock()
	if runs != 1 || first.Value() == last.Value() {
		t.Fatalf("two publishes queued %d runs", runs)
	}
	drainAll(s1)
	drainAll(s2)
	runtime.GC()
	if first.Value() != nil || last.Value() != nil {
		t.Fatal("a drained chain is still reachable")
	}
	if m, ok := b.Get("w"); !ok || string(m.Payload) != "two" {
		t.Fatalf("cache holds %q, %v", m.Payload, ok)
	}
}
