package private

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// A PUB whose value the cache cannot keep is refused: CACHE_FULL for a
// new topic in a full cache, TOPIC_QUOTA past the connection's quota of
// new topics; by ACK status or, without a msg id, a non-fatal ERROR.
func TestSessionRefusesWhatTheCacheCannotKeep(t *testing.T) {
	b := newBus(bus.Options{MaxTopics: 3, TopicQuota: 2})
	h := New(config.Private{}, b, nil)
	ts := openSession(t, h)
	ts.hello()
	for i, topic := range []string{"a", "b"} {
		if err := ts.feed(pubFrame(uint32(i+1), topic, "v")); err != nil {
			t.Fatal(err)
		}
		ts.expectAck(uint32(i+1), CodeOK)
	}
	for _, id := range []uint32{7, 0} {
		if err := ts.feed(pubFrame(id, "c", "v")); err != nil {
			t.Fatal(err)
		}
		if id != 0 {
			ts.expectAck(id, CodeTopicQuota)
		} else {
			ts.expectError(CodeTopicQuota)
		}
	}
	other := openSession(t, h)
	other.hello()
	if err := other.feed(pubFrame(1, "c", "v"), pubFrame(2, "d", "v"), pubFrame(3, "a", "again")); err != nil {
		t.Fatal(err)
	}
	fs := other.conn.frames(t)
	want := []Code{CodeOK, CodeCacheFull, CodeOK}
	for i, f := range fs {
		if a, _ := DecodeAck(f.Payload); f.Type != TypeAck || a.Status != want[i] {
			t.Fatalf("answer %d: %v %+v, want status %v", i, f.Type, a, want[i])
		}
	}
	if len(fs) != 3 || h.Stats().Rejected != 3 || h.Stats().Published != 4 {
		t.Fatalf("%d answers, stats %+v", len(fs), h.Stats())
	}
	if _, ok := b.Get("d"); ok {
		t.Fatal("a refused value was cached")
	}
}

// What a full queue dropped is told before the next delivery, with the
// count, and counted per connection and in Stats.
func TestSessionDropNotice(t *testing.T) {
	b := newBus(bus.Options{})
	h := New(config.Private{Queue: 4}, b, nil)
	ts := openSession(t, h)
	ts.hello()
	if err := ts.feed(subFrame(TypeSub, 0, "d")); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := b.Publish("d", []byte(fmt.Sprint(i)), "test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.sess.(protocols.Notified).Notified(); err != nil {
		t.Fatal(err)
	}
	fs := ts.conn.frames(t)
	if len(fs) != 5 || fs[0].Type != TypeDropped {
		t.Fatalf("wrote %v, want DROPPED and 4 PUBs", types(fs))
	}
	if n, err := DecodeDropped(fs[0].Payload); err != nil || n != 6 {
		t.Fatalf("DROPPED %d, %v; want 6", n, err)
	}
	if p, _ := DecodePub(fs[1].Payload); string(p.Data) != "6" {
		t.Fatalf("first delivery after the drop is %q, want 6", p.Data)
	}
	if ts.conn.dropped != 6 || h.Stats().Dropped != 6 {
		t.Fatalf("counted %d per connection, %d in stats", ts.conn.dropped, h.Stats().Dropped)
	}
	if err := b.Publish("d", []byte("10"), "test"); err != nil {
		t.Fatal(err)
	}
	if got, err := ts.deliveries(); err != nil || len(got) != 1 || ts.conn.dropped != 6 {
		t.Fatalf("next delivery: %d, %v, dropped %d", len(got), err, ts.conn.dropped)
	}
}

// A replay of 20,000 retained values goes out in bounded rounds: each
// Notified writes a few batches and asks to be called again, so the
// worker serves its other connections in between; a repeated SUB of the
// same filter does not replay again.
func TestSessionReplayIsBatched(t *testing.T) {
	const topics = 20000
	b := newBus(bus.Options{MaxTopics: topics})
	for i := range topics {
		if err := b.Publish(fmt.Sprintf("r/%d", i), []byte("v"), "test"); err != nil {
			t.Fatal(err)
		}
	}
	h := New(config.Private{}, b, nil)
	ts := openSession(t, h)
	ts.hello()
	var subs [][]byte
	for range 100 {
		subs = append(subs, subFrame(TypeSub, 0, "r/#"))
	}
	if err := ts.feed(subs...); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	calls := 0
	for calls = 1; ; calls++ {
		before := ts.conn.notifies.Load()
		got, err := ts.deliveries()
		if err != nil {
			t.Fatal(err)
		}
		// A batch holds deliverBatch bytes of queue, each message
		// counting 80 bytes of slot besides its topic and payload.
		if len(got) == 0 || len(got) > deliverRounds*batchMsgs {
			t.Fatalf("call %d delivered %d", calls, len(got))
		}
		for _, p := range got {
			if seen[string(p.Topic)] || p.Flags&PubRetained == 0 {
				t.Fatalf("%s: repeated, or not retained", p.Topic)
			}
			seen[string(p.Topic)] = true
		}
		if ts.conn.notifies.Load() == before {
			break // nothing more: no new Notify asked for
		}
	}
	if len(seen) != topics || calls < 3 {
		t.Fatalf("%d retained values in %d calls", len(seen), calls)
	}
}

// TestDeliverLetsGoOfEarlierRounds: a deliver call drains round after
// round into one pooled scratch. Once it returns, the scratch pins no
// message and no frame, also not those of a longer earlier round that
// the last round did not overwrite (they used to stay until the scratch
// was next used).
func TestDeliverLetsGoOfEarlierRounds(t *testing.T) {
	if raceBuild {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	// A collection empties the pools: one between the deliveries and the
	// look into the pool below lost the rounds' scratch (a test run with
	// -count=5 failed so).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// One P, so that the test looks into the pool of the P that deliver
	// put the scratch back on: a goroutine moved to another P in between
	// finds that P's pool, and another P's private slot is not shared
	// (the two twins failed 13 of 600 runs together, -count=300 each, as
	// 32-bit ARM tests under qemu).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b := newBus(bus.Options{MaxTopics: 4096})
	h := New(config.Private{}, b, nil)
	sessions := []*testSession{openSession(t, h), openSession(t, h)} // two: the frames are shared
	for _, ts := range sessions {
		ts.hello()
		if err := ts.feed(subFrame(TypeSub, 1, "t/#")); err != nil {
			t.Fatal(err)
		}
		ts.expectAck(1, CodeOK)
	}
	// A round takes deliverBatch bytes of queue (80 a message besides
	// topic and payload): 1.5 rounds' worth makes a short second round.
	const perMsg = 80 + len("t/0000") + 8
	n := deliverBatch / perMsg * 3 / 2
	for i := range n {
		if err := b.Publish(fmt.Sprintf("t/%04d", i), []byte("payload!"), "test"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := sessions[0].deliveries()
	if err != nil || len(got) != n {
		t.Fatalf("%d of %d delivered, %v", len(got), n, err)
	}
	// The pool may hand out another scratch first (one that an earlier
	// call put back): the rounds' is the large one.
	var scratch *deliverScratch
	for range 4 {
		s := h.deliveries.get()
		defer h.deliveries.put(s)
		if scratch == nil || cap(s.msgs) > cap(scratch.msgs) {
			scratch = s
		}
	}
	if cap(scratch.msgs) < n/2 || cap(scratch.frames) < n/2 {
		t.Fatalf("scratch of %d messages, %d frames: not the one the rounds used", cap(scratch.msgs), cap(scratch.frames))
	}
	for i, m := range scratch.msgs[:cap(scratch.msgs)] {
		if m.Topic != "" || m.Payload != nil {
			t.Fatalf("message %d of the scratch still holds %s", i, m.Topic)
		}
	}
	for i, f := range scratch.frames[:cap(scratch.frames)] {
		if f != nil {
			t.Fatalf("frame %d of the scratch still holds %d bytes", i, len(f))
		}
	}
}
