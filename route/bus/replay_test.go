package bus

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
)

// drainAllBy drains with a byte budget per call, as a server does, and
// returns everything and how many calls it took.
func drainAllBy(s *Subscriber, budget int) ([]Message, int) {
	var got []Message
	calls := 0
	for {
		calls++
		batch := s.Drain(got, budget)
		got = batch.Msgs
		if !batch.More {
			return got, calls
		}
	}
}

// A replay of 10,000 topics comes a bounded batch per Drain, each topic
// once, marked retained.
func TestReplayIsIncremental(t *testing.T) {
	const topics, budget = 10000, 4096
	b := newTestBus(t, Options{})
	for i := range topics {
		mustPublish(t, b, fmt.Sprintf("r/%d", i), "v")
	}
	s := mustSub(t, b, nil, "r/#")
	if s.Len() != 0 {
		t.Fatalf("Subscribe queued %d messages; the replay must wait for Drain", s.Len())
	}
	seen := map[string]bool{}
	calls := 0
	for more := true; more; calls++ {
		batch := s.Drain(nil, budget)
		size := 0
		for _, m := range batch.Msgs {
			size += m.size()
			if !m.Retained || seen[m.Topic] {
				t.Fatalf("bad or repeated retained value %+v", m)
			}
			seen[m.Topic] = true
		}
		if last := batch.Msgs[len(batch.Msgs)-1].size(); size-last >= budget {
			t.Fatalf("a Drain took %d bytes for a budget of %d", size, budget)
		}
		more = batch.More
	}
	if len(seen) != topics || calls < 50 {
		t.Fatalf("replayed %d topics in %d calls", len(seen), calls)
	}
	if st := b.Stats(); st.Delivered != topics || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A filter that matches one topic in 20,000 reads at most replayScan
// entries per Drain, so its cost per call is bounded too.
func TestReplayScanIsBounded(t *testing.T) {
	b := newTestBus(t, Options{})
	for i := range 20000 {
		mustPublish(t, b, fmt.Sprintf("s/%d/x", i), "v")
	}
	s := mustSub(t, b, nil, "s/+/y", "s/7/+")
	got, calls := drainAllBy(s, 1<<20)
	if len(got) != 1 || got[0].Topic != "s/7/x" {
		t.Fatalf("got %v", got)
	}
	if want := 2 * 20000 / replayScan; calls < want {
		t.Fatalf("two full scans of 20,000 entries took %d Drains, want at least %d", calls, want)
	}
}

// A replay resumes where it stopped whatever happens to the cache in
// between: topics forgotten (compacting the shards' order), added and
// updated. Every topic cached at Subscribe and untouched since is
// replayed once; an updated one comes live, after its old value only if
// that was replayed before the update; a forgotten one may or may not
// come, once at most.
func TestReplayResumesAcrossChanges(t *testing.T) {
	const topics = 20000
	b := newTestBus(t, Options{})
	for i := range topics {
		mustPublish(t, b, "c/"+strconv.Itoa(i), "old")
	}
	s := mustSub(t, b, nil, "c/#")
	got := s.Drain(nil, 8<<10).Msgs
	compacted := func() (n int) {
		for i := range b.shards {
			n += len(b.shards[i].order)
		}
		return n
	}
	for i := range topics { // three quarters go: every shard's order compacts
		if i%4 != 3 {
			b.Forget("c/" + strconv.Itoa(i))
		}
	}
	for i := 3; i < topics; i += 40 {
		mustPublish(t, b, "c/"+strconv.Itoa(i), "new")
	}
	mustPublish(t, b, "c/added", "new")
	if n := compacted(); n > topics/2 {
		t.Fatalf("%d entries in the shards' order: none compacted", n)
	}
	rest, _ := drainAllBy(s, 8<<10)
	got = append(got, rest...)

	early := map[string]bool{} // replayed before the changes
	for _, m := range got[:len(got)-len(rest)] {
		early[m.Topic] = true
	}
	seen := map[string][]string{}
	for _, m := range got {
		v := string(m.Payload)
		if m.Retained != (v == "old") {
			t.Fatalf("%s: %q retained=%v", m.Topic, v, m.Retained)
		}
		seen[m.Topic] = append(seen[m.Topic], v)
	}
	for topic, vs := range seen {
		if len(vs) > 1 && (!early[topic] || len(vs) != 2 || vs[1] != "new") {
			t.Fatalf("%s: %v (replayed before the changes: %v)", topic, vs, early[topic])
		}
	}
	for i := 3; i < topics; i += 4 {
		want := "old"
		if i%40 == 3 {
			want = "new"
		}
		if vs := seen["c/"+strconv.Itoa(i)]; len(vs) == 0 || vs[len(vs)-1] != want {
			t.Fatalf("c/%d: got %v, want %q last", i, vs, want)
		}
	}
	if vs := seen["c/added"]; len(vs) != 1 || vs[0] != "new" {
		t.Fatal("the topic added during the replay did not come live")
	}
}

// Unsubscribe and Close stop a replay under way.
func TestUnsubscribeStopsReplay(t *testing.T) {
	b := newTestBus(t, Options{})
	for i := range 3000 {
		mustPublish(t, b, "u/"+strconv.Itoa(i), "v")
	}
	s := mustSub(t, b, nil, "u/#")
	first := s.Drain(nil, 1024)
	if err := s.Unsubscribe("u/#"); err != nil {
		t.Fatal(err)
	}
	if batch := s.Drain(nil, 0); len(batch.Msgs) != 0 || batch.More || !first.More {
		t.Fatalf("after Unsubscribe: %d more messages, More %v", len(batch.Msgs), batch.More)
	}
	if err := s.Subscribe("u/#"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if batch := s.Drain(nil, 0); len(batch.Msgs) != 0 || batch.More {
		t.Fatalf("after Close: %d messages", len(batch.Msgs))
	}
}

// The queue is bounded in bytes as well as messages; what a full queue
// drops is reported once, by the next Drain.
func TestQueueBytesAndDropReport(t *testing.T) {
	payload := make([]byte, 1000)
	per := (&Message{Topic: "q", Payload: payload}).size()
	b := newTestBus(t, Options{QueueBytes: 10 * per})
	s := mustSub(t, b, nil, "q")
	for i := range 25 {
		payload[0] = byte(i)
		if err := b.Publish("q", payload, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 10 || s.Dropped() != 15 {
		t.Fatalf("queued %d, dropped %d; want 10 and 15", s.Len(), s.Dropped())
	}
	batch := s.Drain(nil, 3*per)
	if len(batch.Msgs) != 3 || batch.Dropped != 15 || !batch.More || batch.Msgs[0].Payload[0] != 15 {
		t.Fatalf("first Drain: %d messages, dropped %d, more %v", len(batch.Msgs), batch.Dropped, batch.More)
	}
	batch = s.Drain(nil, 0)
	if len(batch.Msgs) != 7 || batch.Dropped != 0 || batch.More {
		t.Fatalf("second Drain: %d messages, dropped %d, more %v", len(batch.Msgs), batch.Dropped, batch.More)
	}
	big := make([]byte, 20*per) // bigger than the whole queue: still goes into an empty one
	if err := b.Publish("q", big, "test"); err != nil || s.Len() != 1 {
		t.Fatalf("a big message into an empty queue: %v, len %d", err, s.Len())
	}
}

// The ring of slots never outgrows QueueBytes, whatever Queue allows.
func TestRingBoundedByQueueBytes(t *testing.T) {
	const fit = 66 // messages of 81 bytes: the ring would double to 128 slots
	b := newTestBus(t, Options{QueueBytes: fit * (msgOverhead + 1), Queue: 1 << 20})
	s := mustSub(t, b, nil, "r")
	for range 1000 {
		mustPublish(t, b, "r", "")
	}
	if limit := fit * (msgOverhead + 1) / msgOverhead; len(s.ring) > limit || s.Len() != fit {
		t.Fatalf("ring of %d slots holding %d, want at most %d and %d", len(s.ring), s.Len(), limit, fit)
	}
}

// Subscribers that join while publishers run and drain in small batches
// get, per topic, at most the cached value and then every later value,
// in order, none twice; with nothing dropped, the stream is complete.
func TestReplayWhilePublishing(t *testing.T) {
	const publishers, perPublisher, topics = 4, 2000, 64
	b := New(Options{})
	for i := range topics {
		mustPublish(t, b, fmt.Sprintf("w/%d", i), "-1")
	}
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range perPublisher {
				topic := fmt.Sprintf("w/%d", (p*topics/publishers)+i%(topics/publishers))
				if err := b.Publish(topic, []byte(strconv.Itoa(i)), "test"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	subs := make([]*Subscriber, 8)
	for i := range subs {
		subs[i] = mustSub(t, b, nil, "w/#")
	}
	wg.Wait()
	for _, s := range subs {
		got, _ := drainAllBy(s, 512)
		last := map[string]int{}
		for _, m := range got {
			v, _ := strconv.Atoi(string(m.Payload))
			prev, started := last[m.Topic]
			if started && (m.Retained || v <= prev) {
				t.Fatalf("%s: %d (retained %v) after %d", m.Topic, v, m.Retained, prev)
			}
			last[m.Topic] = v
		}
		if len(last) != topics || s.Dropped() != 0 {
			t.Fatalf("%d topics seen, %d dropped", len(last), s.Dropped())
		}
		per := topics / publishers
		for i := range topics {
			if want := perPublisher - per + i%per; last[fmt.Sprintf("w/%d", i)] != want {
				t.Fatalf("w/%d ends at %d, want %d", i, last[fmt.Sprintf("w/%d", i)], want)
			}
		}
	}
}
