package bus

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// waitFor polls cond, yielding the processor, with a generous bound on
// how many times; it never measures time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 50_000_000 {
		if cond() {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("gave up waiting for %s", what)
}

// drained is a subscriber whose messages a goroutine collects as they are
// notified.
type drained struct {
	sub     *Subscriber
	filters []string
	wake    chan struct{}
	got     []Message
}

// newDrained subscribes to filters on b, its notifications waking run.
func newDrained(t *testing.T, b *Bus, filters ...string) *drained {
	t.Helper()
	d := &drained{filters: filters, wake: make(chan struct{}, 1)}
	d.sub = mustSub(t, b, func() {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}, filters...)
	return d
}

// startDrainers runs each subscriber's collector until done is closed;
// wait on the returned group for them to finish.
func startDrainers(subs []*drained, done <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, d := range subs {
		wg.Add(1)
		go d.run(done, &wg)
	}
	return &wg
}

// startPublishers runs publishers goroutines on wg, publisher p
// publishing message(p, i) for i from 0 to perPublisher-1 in order; the
// first error ends that publisher's run and fails the test.
func startPublishers(t *testing.T, b *Bus, wg *sync.WaitGroup, publishers, perPublisher int, message func(p, i int) (topic string, payload []byte)) {
	for p := range publishers {
		wg.Go(func() {
			for i := range perPublisher {
				topic, payload := message(p, i)
				if err := b.Publish(topic, payload, "test"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
}

func (d *drained) run(done <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-d.wake:
			d.got = d.sub.Drain(d.got, 0).Msgs
		case <-done:
			d.got = d.sub.Drain(d.got, 0).Msgs
			return
		}
	}
}

func TestConcurrentNoLoss(t *testing.T) {
	const publishers, perPublisher, churners = 4, 500, 4
	b := New(Options{Queue: publishers * perPublisher})
	filterSets := [][]string{
		{"t/#", "t/+/+"}, // overlapping: still once each
		{"#"},
		{"t/0/+"},
		{"t/+/1"},
		{"t/1/2", "t/1/+", "+/1/#"},
		{"t/+/3/#", "nothing"},
	}
	var subs []*drained
	for _, fs := range filterSets {
		subs = append(subs, newDrained(t, b, fs...))
	}
	topic := func(p, i int) string { return fmt.Sprintf("t/%d/%d", p, i%4) }

	done := make(chan struct{})
	drainers := startDrainers(subs, done)
	var workers sync.WaitGroup
	startPublishers(t, b, &workers, publishers, perPublisher, func(p, i int) (string, []byte) {
		return topic(p, i), []byte(strconv.Itoa(i))
	})
	for range churners {
		workers.Go(func() { churn(t, b) })
	}
	workers.Wait()
	close(done)
	drainers.Wait()

	for _, d := range subs {
		want := 0
		for p := range publishers {
			for i := range perPublisher {
				if matchesAny(d.filters, topic(p, i)) {
					want++
				}
			}
		}
		checkOnce(t, d.filters, d.got, want)
		if d.sub.Dropped() != 0 {
			t.Errorf("%v: dropped %d with a queue big enough for all", d.filters, d.sub.Dropped())
		}
	}
	if st := b.Stats(); st.Subscribers != len(subs) || st.Published != publishers*perPublisher {
		t.Errorf("stats after churn = %+v", st)
	}
}

// TestLoneMessagesRecycled: the message of a publish that reached one
// subscriber is recycled once its queue lets it go (encoding.go), drained
// or evicted, never while it is queued. Publishers each to a topic of its
// own, read by one subscriber with a small queue that evicts, drained as
// they go: every message drained is whole (its payload names its topic)
// and in order, and each was drained or counted dropped.
func TestLoneMessagesRecycled(t *testing.T) {
	const publishers, perPublisher = 4, 2000
	b := New(Options{Queue: 8})
	subs := make([]*drained, publishers)
	for p := range subs {
		subs[p] = newDrained(t, b, fmt.Sprintf("lone/%d", p))
	}
	done := make(chan struct{})
	drainers := startDrainers(subs, done)
	var workers sync.WaitGroup
	startPublishers(t, b, &workers, publishers, perPublisher, func(p, i int) (string, []byte) {
		topic := fmt.Sprintf("lone/%d", p)
		return topic, fmt.Appendf(nil, "%s#%d", topic, i)
	})
	workers.Wait()
	close(done)
	drainers.Wait()
	for p, d := range subs {
		topic, last := fmt.Sprintf("lone/%d", p), -1
		for _, m := range d.got {
			name, n, _ := strings.Cut(string(m.Payload), "#")
			i, err := strconv.Atoi(n)
			if m.Topic != topic || name != topic || err != nil || i <= last || m.Src != "test" {
				t.Fatalf("%s: after #%d drained %q from %q (src %q)", topic, last, m.Payload, m.Topic, m.Src)
			}
			last = i
		}
		if got := len(d.got) + int(d.sub.Dropped()); got != perPublisher || last != perPublisher-1 {
			t.Errorf("%s: %d drained and %d dropped, the last #%d; want %d in all, the last #%d",
				topic, len(d.got), d.sub.Dropped(), last, perPublisher, perPublisher-1)
		}
	}
}

// churn subscribes, reads and closes subscribers while others publish.
func churn(t *testing.T, b *Bus) {
	var buf []Message
	for i := range 100 {
		s, err := b.NewSubscriber(func() {})
		if err != nil {
			t.Error(err)
			return
		}
		for _, f := range []string{"t/+/0", "#", fmt.Sprintf("t/%d/#", i%4)} {
			if err := s.Subscribe(f); err != nil {
				t.Error(err)
			}
		}
		buf = s.Drain(buf[:0], 0).Msgs
		b.Get("t/1/1")
		b.Retained("t/2/+", func(Message) bool { return true })
		b.Stats()
		if err := s.Unsubscribe("#"); err != nil {
			t.Error(err)
		}
		if i%2 == 0 {
			s.Close()
		} else {
			s.Close()
			s.Close()
		}
	}
}

func matchesAny(filters []string, topic string) bool {
	for _, f := range filters {
		if Match(f, topic) {
			return true
		}
	}
	return false
}

// checkOnce asserts want messages, each (topic, sequence number) once.
func checkOnce(t *testing.T, filters []string, got []Message, want int) {
	t.Helper()
	type key struct {
		topic string
		seq   uint64
	}
	seen := make(map[key]bool, len(got))
	for _, m := range got {
		k := key{m.Topic, m.Seq}
		if seen[k] {
			t.Errorf("%v: %s seq %d delivered twice", filters, m.Topic, m.Seq)
		}
		seen[k] = true
		if !matchesAny(filters, m.Topic) {
			t.Errorf("%v: got unmatched topic %q", filters, m.Topic)
		}
	}
	if len(got) != want {
		t.Errorf("%v: got %d messages, want %d", filters, len(got), want)
	}
}

// TestSubscribeWhilePublishing checks the replay/live split: a subscriber
// that joins mid-stream gets, per topic, the cached value and then every
// later one, in order, none twice.
func TestSubscribeWhilePublishing(t *testing.T) {
	t.Run("publish", func(t *testing.T) { subscribeWhilePublishing(t, false) })
	// The publishers keep a Route each, which remembers their topic's
	// subscribers (an earlier one, "p/+"): the new subscription must
	// reach them as it reaches a publish that looks its subscribers up.
	t.Run("route", func(t *testing.T) { subscribeWhilePublishing(t, true) })
}

func subscribeWhilePublishing(t *testing.T, routes bool) {
	const publishers, perPublisher = 4, 3000
	b := New(Options{Queue: publishers * perPublisher})
	if routes {
		mustSub(t, b, nil, "p/+")
	}
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			topic := fmt.Sprintf("p/%d", p)
			var r Route
			for i := range perPublisher {
				var err error
				if routes {
					err = b.PublishRoute(&r, nil, []byte(topic), []byte(strconv.Itoa(i)), "test")
				} else {
					err = b.Publish(topic, []byte(strconv.Itoa(i)), "test")
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	waitFor(t, "publishing to start", func() bool { return b.Stats().Published >= publishers })
	s := mustSub(t, b, nil, "p/#")
	wg.Wait()

	next := map[string]int{}
	for _, m := range s.Drain(nil, 0).Msgs {
		k, err := strconv.Atoi(string(m.Payload))
		if err != nil {
			t.Fatal(err)
		}
		want, started := next[m.Topic]
		switch {
		case m.Retained && started:
			t.Errorf("%s: retained value %d after live ones", m.Topic, k)
		case started && k != want:
			t.Errorf("%s: got %d after %d", m.Topic, k, want-1)
		}
		next[m.Topic] = k + 1
	}
	for p := range publishers {
		topic := fmt.Sprintf("p/%d", p)
		if next[topic] != perPublisher {
			t.Errorf("%s: stream ends at %d, want %d", topic, next[topic]-1, perPublisher-1)
		}
	}
}

// TestConcurrentDisconnect cuts many slow subscribers off at once from
// several publishers: each is counted once and leaves nothing behind.
func TestConcurrentDisconnect(t *testing.T) {
	const publishers, subscribers = 4, 50
	b := New(Options{Queue: 8, Drop: Disconnect})
	var subs []*Subscriber
	for i := range subscribers {
		subs = append(subs, mustSub(t, b, func() {}, "d/#", fmt.Sprintf("d/%d", i%publishers)))
	}
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for range 100 {
				if err := b.Publish(fmt.Sprintf("d/%d", p), []byte("x"), "test"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, s := range subs {
		if !s.Disconnected() {
			t.Fatal("a subscriber that never drained is still connected")
		}
	}
	st := b.Stats()
	if st.Disconnected != subscribers || st.Subscribers != 0 {
		t.Fatalf("stats %+v, want %d disconnected, 0 subscribers", st, subscribers)
	}
	rl := b.trie.reader(0)
	rl.RLock()
	defer rl.RUnlock()
	if !b.root.empty() {
		t.Fatal("filters of disconnected subscribers left in the trie")
	}
}
