package bus

import (
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Queued fan-out costs memory per message in flight, not per message per
// subscriber: 1,000 subscribers holding the same 200 publishes share them.
// When every queue held its own copy (an 80-byte slot each) this took
// over 16 MB; shared, the queues hold 8-byte pointers.
func TestFanOutMemoryGrowsWithMessagesNotCopies(t *testing.T) {
	const subs, msgs = 1000, 200
	b := newTestBus(t, Options{Queue: 256, MaxSubscribers: subs})
	all := make([]*Subscriber, subs)
	for i := range all {
		all[i] = mustSub(t, b, nil, "fan/#")
	}
	mustPublish(t, b, "fan/warm", "x") // the cache entry and every subscriber's first ring
	drainEvery(all)
	before := heapInUse()
	payload := make([]byte, 64)
	for range msgs {
		if err := b.Publish("fan/out", payload, "test"); err != nil {
			t.Fatal(err)
		}
	}
	grew := heapInUse() - before
	// Per (message, subscriber) pair: a queue slot (8 bytes) and the ring's
	// spare capacity (it doubles) share this bound; a copy per pair would not.
	if perPair := grew / (subs * msgs); perPair > 24 {
		t.Errorf("queued fan-out took %d bytes, %d per message per subscriber; want at most 24", grew, perPair)
	}
	for _, s := range all {
		if got := s.Drain(nil, 0).Msgs; len(got) != msgs || got[msgs-1].Topic != "fan/out" {
			t.Fatalf("a subscriber drained %d messages, want %d", len(got), msgs)
		}
	}
	runtime.KeepAlive(all)
}

// A subscriber that falls a few hundred messages behind and catches up,
// again and again, reuses its grown rings: the 200 publishes of a round
// allocate what they always do (the payload copy, 1 each: the message of
// a lone subscriber is recycled once drained, encoding.go) and the queue
// nothing. Rings of 128 and 256 slots were not pooled before, and cost 2
// allocations a round.
func TestLaggingSubscriberReusesRings(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	b := newTestBus(t, Options{})
	s := mustSub(t, b, nil, "lag")
	payload := []byte("v")
	dst := make([]Message, 0, 256)
	round := func() {
		for range 200 {
			if err := b.Publish("lag", payload, "test"); err != nil {
				t.Fatal(err)
			}
		}
		if got := s.Drain(dst[:0], 0).Msgs; len(got) != 200 {
			t.Fatalf("drained %d, want 200", len(got))
		}
	}
	if allocs := testing.AllocsPerRun(20, round); allocs != 200 {
		t.Errorf("a round of 200 publishes and a drain: %v allocations, want 200", allocs)
	}
}

func drainEvery(subs []*Subscriber) {
	for _, s := range subs {
		s.Drain(nil, 0)
	}
}

var testEncoding = NewEncoding("bus-test")

// The subscribers of one publish share what the first of them encoded;
// retained replays, the cache's values and messages built by hand keep
// none, and a second encoding does not replace the first.
func TestEncodedOnceSharedByEverySubscriber(t *testing.T) {
	b := newTestBus(t, Options{})
	s1, s2 := mustSub(t, b, nil, "e/#"), mustSub(t, b, nil, "e/+")
	mustPublish(t, b, "e/1", "v")
	m1, m2 := drainAll(s1)[0], drainAll(s2)[0]
	if m1.Encoded(testEncoding) != nil {
		t.Fatal("a fresh message has an encoding")
	}
	frame := m1.SetEncoded(testEncoding, []byte("frame of e/1"))
	got := m2.Encoded(testEncoding)
	if string(got) != "frame of e/1" || unsafe.SliceData(got) != unsafe.SliceData(frame) {
		t.Fatalf("the other subscriber's copy has %q, not the same bytes", got)
	}
	if again := m2.SetEncoded(testEncoding, []byte("another")); unsafe.SliceData(again) != unsafe.SliceData(frame) {
		t.Fatalf("a second SetEncoded replaced the first: %q", again)
	}
	cached, _ := b.Get("e/1")
	late := mustSub(t, b, nil, "e/1")
	replayed := drainAll(late)[0]
	hand := Message{Topic: "e/1"}
	for name, m := range map[string]*Message{"cached": &cached, "replayed": &replayed, "by hand": &hand} {
		if m.Encoded(testEncoding) != nil {
			t.Errorf("%s message has an encoding", name)
		}
		if b := m.SetEncoded(testEncoding, []byte("own")); string(b) != "own" || m.Encoded(testEncoding) != nil {
			t.Errorf("%s message stored an encoding", name)
		}
	}
}

// Subscribers draining on several goroutines at once all end up with the
// one stored encoding (run with -race).
func TestEncodedRaceOneWinner(t *testing.T) {
	b := newTestBus(t, Options{})
	const n = 8
	subs := make([]*Subscriber, n)
	for i := range subs {
		subs[i] = mustSub(t, b, nil, "r")
	}
	mustPublish(t, b, "r", "v")
	got := make([][]byte, n)
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := drainAll(s)[0]
			if f := m.Encoded(testEncoding); f != nil {
				got[i] = f
				return
			}
			got[i] = m.SetEncoded(testEncoding, []byte{byte(i)})
		}()
	}
	wg.Wait()
	for i := range got {
		if unsafe.SliceData(got[i]) != unsafe.SliceData(got[0]) {
			t.Fatalf("subscriber %d has its own encoding %v, subscriber 0 has %v", i, got[i], got[0])
		}
	}
}

// NewEncoding refuses a name twice and more than MaxEncodings.
func TestNewEncodingLimits(t *testing.T) {
	mustPanic := func(name string) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("NewEncoding(%q) did not panic", name)
			}
		}()
		NewEncoding(name)
	}
	mustPanic("bus-test")
	for i := len(encodingRegistry.names); i < MaxEncodings; i++ {
		NewEncoding(string(rune('a' + i)))
	}
	mustPanic("one too many")
}

// A publish that reaches one subscriber (a device's own echo, a single
// dashboard) has nobody to share an encoding with: its message carries no
// encoding slots, so the subscriber encodes it into its own output rather
// than into an array of its own stored on the message. Two subscribers,
// or one reached through two of its filters and two others, share.
func TestLoneSubscriberDoesNotShare(t *testing.T) {
	b := newTestBus(t, Options{})
	lone := mustSub(t, b, nil, "one/topic")
	if err := b.Publish("one/topic", []byte("v"), "test"); err != nil {
		t.Fatal(err)
	}
	got := lone.Drain(nil, 0).Msgs
	if len(got) != 1 || string(got[0].Payload) != "v" {
		t.Fatalf("drained %v", got)
	}
	if got[0].Shared() {
		t.Fatal("a message with one subscriber has encoding slots to share")
	}
	if frame := got[0].SetEncoded(testEncoding, []byte("frame")); string(frame) != "frame" || got[0].Encoded(testEncoding) != nil {
		t.Fatal("a lone subscriber's message stored an encoding")
	}
	// One subscriber matched by two of its filters is still one.
	twice := mustSub(t, b, nil, "two/+", "two/#")
	if err := b.Publish("two/x", []byte("w"), "test"); err != nil {
		t.Fatal(err)
	}
	if got := twice.Drain(nil, 0).Msgs; len(got) != 1 || got[0].Shared() {
		t.Fatalf("one subscriber through two filters: %d messages, shared %v", len(got), len(got) == 1 && got[0].Shared())
	}
	other := mustSub(t, b, nil, "two/x")
	if err := b.Publish("two/x", []byte("z"), "test"); err != nil {
		t.Fatal(err)
	}
	a, c := twice.Drain(nil, 0).Msgs, other.Drain(nil, 0).Msgs
	if len(a) != 1 || len(c) != 1 || !a[0].Shared() || !c[0].Shared() {
		t.Fatal("a message with two subscribers is not shared")
	}
}
