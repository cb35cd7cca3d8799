package bus

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"
)

// fakeClock returns 1000, 2000, 3000, ... so TS is predictable.
func fakeClock() func() int64 {
	var n atomic.Int64
	return func() int64 { return n.Add(1) * 1000 }
}

func newTestBus(t testing.TB, o Options) *Bus {
	t.Helper()
	if o.Now == nil {
		o.Now = fakeClock()
	}
	return New(o)
}

func mustSub(t testing.TB, b *Bus, notify func(), filters ...string) *Subscriber {
	t.Helper()
	s, err := b.NewSubscriber(notify)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for _, f := range filters {
		if err := s.Subscribe(f); err != nil {
			t.Fatalf("Subscribe(%q): %v", f, err)
		}
	}
	return s
}

func mustPublish(t testing.TB, b *Bus, topic, payload string) {
	t.Helper()
	if err := b.Publish(topic, []byte(payload), "test"); err != nil {
		t.Fatalf("Publish(%q): %v", topic, err)
	}
}

// drainAll takes everything a subscriber has, its replays to the end.
func drainAll(s *Subscriber) []Message { return s.Drain(nil, 0).Msgs }

// payloads returns the drained payloads as strings, "topic=payload".
func payloads(s *Subscriber) []string {
	var out []string
	for _, m := range drainAll(s) {
		out = append(out, m.Topic+"="+string(m.Payload))
	}
	return out
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n") && len(a) == len(b)
}

func TestParseDropPolicy(t *testing.T) {
	tests := []struct {
		in   string
		want DropPolicy
		err  bool
	}{
		{"", DropOldest, false},
		{"oldest", DropOldest, false},
		{"newest", DropNewest, false},
		{"disconnect", Disconnect, false},
		{"Oldest", 0, true},
		{"drop", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseDropPolicy(tt.in)
		if tt.err {
			if !errors.Is(err, ErrInvalidDropPolicy) {
				t.Errorf("ParseDropPolicy(%q) error = %v, want ErrInvalidDropPolicy", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseDropPolicy(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if tt.in != "" && got.String() != tt.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tt.in)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := New(Options{MaxTopicLen: 1 << 20, Queue: -1, Drop: 9}).Options()
	want := Options{
		MaxTopics: DefaultMaxTopics, TopicQuota: DefaultTopicQuota, MaxPayload: DefaultMaxPayload, MaxTopicLen: maxTopicLenCap,
		Queue: DefaultQueue, QueueBytes: DefaultQueueBytes, MaxFilters: DefaultMaxFilters, MaxSubscribers: DefaultMaxSubscribers,
	}
	if o.Now == nil {
		t.Fatal("no default clock")
	}
	o.Now = nil
	if fmt.Sprintf("%+v", o) != fmt.Sprintf("%+v", want) {
		t.Fatalf("defaults = %+v, want %+v", o, want)
	}
}

func TestSubscriberPacks(t *testing.T) {
	if size := unsafe.Sizeof(Subscriber{}); size > 160 {
		t.Fatalf("Subscriber is %d bytes, want at most 160 (every subscribed connection has one)", size)
	}
}

func TestPublishRejects(t *testing.T) {
	b := newTestBus(t, Options{MaxPayload: 4, MaxTopicLen: 8})
	tests := []struct {
		topic   string
		payload string
		want    error
	}{
		{"", "", ErrInvalidTopic},
		{"a/+", "", ErrInvalidTopic},
		{"a/#", "", ErrInvalidTopic},
		{"123456789", "", ErrInvalidTopic},
		{"\xff", "", ErrInvalidTopic},
		{"a", "12345", ErrPayloadTooLarge},
	}
	for _, tt := range tests {
		if err := b.Publish(tt.topic, []byte(tt.payload), "test"); !errors.Is(err, tt.want) {
			t.Errorf("Publish(%q, %d bytes) = %v, want %v", tt.topic, len(tt.payload), err, tt.want)
		}
	}
	mustPublish(t, b, "12345678", "1234")
	st := b.Stats()
	if st.Rejected != uint64(len(tests)) || st.Published != 1 || st.Topics != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestLastValueCache(t *testing.T) {
	b := newTestBus(t, Options{})
	if _, ok := b.Get("plant/temp"); ok {
		t.Fatal("Get on an empty bus found a value")
	}
	mustPublish(t, b, "plant/temp", "20")
	mustPublish(t, b, "plant/hum", "40")
	first, _ := b.Get("plant/temp")
	if err := b.Publish("plant/temp", []byte("21"), "modbus"); err != nil {
		t.Fatal(err)
	}
	m, ok := b.Get("plant/temp")
	// A topic's sequence numbers grow with its publishes; how far depends
	// on the other topics of its shard (here "plant/hum", or not).
	if m.Seq <= first.Seq {
		t.Fatalf("second publish numbered %d after %d", m.Seq, first.Seq)
	}
	want := Message{Topic: "plant/temp", Payload: []byte("21"), Src: "modbus", TS: 3000, Seq: m.Seq}
	if !ok || m.Topic != want.Topic || string(m.Payload) != "21" || m.Src != want.Src ||
		m.TS != want.TS || m.Seq != want.Seq || m.Retained {
		t.Fatalf("Get = %+v, %v; want %+v", m, ok, want)
	}
	if st := b.Stats(); st.Topics != 2 || st.Published != 3 {
		t.Fatalf("stats = %+v", st)
	}
	if !b.Forget("plant/temp") || b.Forget("plant/temp") {
		t.Fatal("Forget should report true once")
	}
	if _, ok := b.Get("plant/temp"); ok || b.Stats().Topics != 1 {
		t.Fatal("Forget left the value cached")
	}
}

func TestPayloadCopiedOnceAndShared(t *testing.T) {
	b := newTestBus(t, Options{})
	s1 := mustSub(t, b, nil, "x")
	s2 := mustSub(t, b, nil, "#")
	src := []byte("hello")
	mustPublish(t, b, "x", string(src))
	if err := b.Publish("x", src, "test"); err != nil {
		t.Fatal(err)
	}
	src[0] = 'J'
	m1, m2 := drainAll(s1), drainAll(s2)
	got, _ := b.Get("x")
	if string(m1[1].Payload) != "hello" || string(got.Payload) != "hello" {
		t.Fatalf("payload changed with the caller's buffer: %q", m1[1].Payload)
	}
	if &m1[1].Payload[0] != &m2[1].Payload[0] || &got.Payload[0] != &m1[1].Payload[0] {
		t.Fatal("subscribers and the cache do not share one copy")
	}
	mustPublish(t, b, "empty", "")
	if got, _ := b.Get("empty"); got.Payload != nil {
		t.Fatalf("empty payload stored as %#v, want nil", got.Payload)
	}
}

// PublishBytes keeps nothing of the caller's topic bytes: a new topic's
// entry, the messages delivered and a Writer's topic survive the buffer's
// reuse, and every message of a topic carries the cache's one string.
func TestPublishBytesKeepsNoTopic(t *testing.T) {
	b := newTestBus(t, Options{})
	lone := mustSub(t, b, nil, "a/1")
	s1, s2 := mustSub(t, b, nil, "b/#"), mustSub(t, b, nil, "b/2")
	w := &recordingWriter{}
	if err := b.Claim("poller", []string{"c/3"}, w); err != nil {
		t.Fatal(err)
	}
	buf := []byte("a/1")
	publish := func(topic, payload string) {
		t.Helper()
		buf = append(buf[:0], topic...)
		if err := b.PublishBytes(nil, buf, []byte(payload), "test"); err != nil {
			t.Fatalf("PublishBytes(%q): %v", topic, err)
		}
		clear(buf)
	}
	publish("a/1", "new")
	publish("a/1", "known")
	publish("b/2", "new")   // shared by two subscribers: chained
	publish("b/2", "known") // chained to the first
	publish("c/3", "write")
	if got := payloads(lone); fmt.Sprint(got) != "[a/1=new a/1=known]" {
		t.Fatalf("lone subscriber got %q", got)
	}
	m1, m2 := drainAll(s1), drainAll(s2)
	if len(m1) != 2 || len(m2) != 2 || m1[0].Topic != "b/2" || m1[1].Topic != "b/2" || m2[1].Topic != "b/2" {
		t.Fatalf("shared deliveries: %+v, %+v", m1, m2)
	}
	cached, _ := b.Get("b/2")
	for _, m := range append(m1, m2...) {
		if unsafe.StringData(m.Topic) != unsafe.StringData(cached.Topic) {
			t.Fatalf("a message of b/2 has a topic string of its own")
		}
	}
	if len(w.got) != 1 || w.got[0] != "c/3=write from test" {
		t.Fatalf("writer got %q", w.got)
	}
	if err := b.PublishBytes(nil, []byte("d/+"), nil, "test"); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("wildcard topic: %v", err)
	}
	if err := b.PublishBytes(nil, nil, nil, "test"); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("empty topic: %v", err)
	}
	if raceEnabled {
		return // sync.Pool drops items at random under the race detector
	}
	buf = append(buf[:0], "a/1"...)
	var dst []Message
	if n := testing.AllocsPerRun(100, func() {
		_ = b.PublishBytes(nil, buf, nil, "test")
		dst = lone.Drain(dst[:0], 0).Msgs
	}); n != 0 {
		t.Fatalf("%v allocations to publish an empty payload to a known topic's lone subscriber, want none", n)
	}
}

// A full cache refuses a publish to a new topic whole: not cached, not
// delivered, counted; known topics go on.
func TestMaxTopics(t *testing.T) {
	b := newTestBus(t, Options{MaxTopics: 2})
	s := mustSub(t, b, nil, "#")
	for _, topic := range []string{"a", "b", "c", "a", "c"} {
		err := b.Publish(topic, []byte("v"), "test")
		if want := topic == "c"; errors.Is(err, ErrCacheFull) != want {
			t.Fatalf("Publish(%q) = %v", topic, err)
		}
	}
	if _, ok := b.Get("c"); ok {
		t.Fatal("topic past MaxTopics was cached")
	}
	if got := payloads(s); !equalStrings(got, []string{"a=v", "b=v", "a=v"}) {
		t.Fatalf("subscriber got %v, want the 3 accepted messages", got)
	}
	if st := b.Stats(); st.Topics != 2 || st.CacheFull != 2 || st.Published != 3 {
		t.Fatalf("stats = %+v, want Topics 2, CacheFull 2, Published 3", st)
	}
	b.Forget("a")
	mustPublish(t, b, "c", "v")
	if _, ok := b.Get("c"); !ok {
		t.Fatal("Forget did not free a place in the cache")
	}
}

// One Quota adds at most TopicQuota new topics; known topics and other
// publishers go on, and a nil quota is unlimited.
func TestTopicQuota(t *testing.T) {
	b := newTestBus(t, Options{TopicQuota: 2})
	var q, other Quota
	for i, topic := range []string{"a", "b", "c", "a"} {
		err := b.PublishWithin(&q, topic, []byte("v"), "test")
		if want := i == 2; errors.Is(err, ErrTopicQuota) != want {
			t.Fatalf("PublishWithin(%q) = %v", topic, err)
		}
	}
	if err := b.PublishWithin(&other, "c", nil, "test"); err != nil {
		t.Fatalf("another quota: %v", err)
	}
	if err := b.PublishWithin(&q, "c", nil, "test"); err != nil {
		t.Fatalf("a topic another publisher added: %v", err)
	}
	for i := range 10 {
		mustPublish(t, b, fmt.Sprint("free/", i), "v")
	}
	if st := b.Stats(); q.Added() != 2 || other.Added() != 1 || st.OverQuota != 1 || st.Topics != 13 {
		t.Fatalf("added %d and %d, stats %+v", q.Added(), other.Added(), st)
	}
}

// Reserved topics keep their values in a full cache, count apart, and
// fall back to ordinary topics when released.
func TestReserve(t *testing.T) {
	b := newTestBus(t, Options{MaxTopics: 2})
	mustPublish(t, b, "tag/1", "old")
	if err := b.Reserve("cfg", []string{"tag/1", "tag/2", "tag/2"}); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Topics != 0 || st.Reserved != 2 {
		t.Fatalf("after Reserve: %+v", st)
	}
	mustPublish(t, b, "junk/1", "x")
	mustPublish(t, b, "junk/2", "x")
	if err := b.Publish("junk/3", nil, "test"); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("third junk topic: %v", err)
	}
	if _, ok := b.Get("tag/2"); ok {
		t.Fatal("a reserved topic without a value has one")
	}
	var q Quota
	q.added = 1 << 20 // a spent quota does not matter either
	if err := b.PublishWithin(&q, "tag/2", []byte("42"), "test"); err != nil {
		t.Fatalf("reserved topic in a full cache: %v", err)
	}
	if m, ok := b.Get("tag/2"); !ok || string(m.Payload) != "42" || !b.Reserved("tag/2") {
		t.Fatalf("reserved value: %+v %v", m, ok)
	}
	if b.Forget("tag/2"); !b.Reserved("tag/2") {
		t.Fatal("Forget released a reservation")
	}
	if err := b.Reserve("other", []string{"tag/1"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve("cfg", []string{"tag/1"}); err != nil { // tag/2 released: no value, gone
		t.Fatal(err)
	}
	if err := b.Reserve("cfg", nil); err != nil || !b.Reserved("tag/1") {
		t.Fatalf("tag/1 is still reserved by other: %v", err)
	}
	if err := b.Reserve("other", nil); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Reserved != 0 || st.Topics != 3 || b.Reserved("tag/1") {
		t.Fatalf("after release: %+v; tag/1 keeps its value as an ordinary topic", st)
	}
	if m, ok := b.Get("tag/1"); !ok || string(m.Payload) != "old" {
		t.Fatalf("released tag/1: %+v %v", m, ok)
	}
	if err := b.Reserve("bad", []string{"ok", "a/#"}); !errors.Is(err, ErrInvalidTopic) || b.Reserved("ok") {
		t.Fatalf("invalid topic: %v", err)
	}
}

func TestRetainedOnSubscribe(t *testing.T) {
	b := newTestBus(t, Options{})
	for _, topic := range []string{"plant/a/temp", "plant/b/temp", "plant/a/hum", "$SYS/up"} {
		mustPublish(t, b, topic, "v:"+topic)
	}
	tests := []struct {
		filter string
		want   []string
	}{
		{"plant/+/temp", []string{"plant/a/temp", "plant/b/temp"}},
		{"plant/a/hum", []string{"plant/a/hum"}},
		{"#", []string{"plant/a/hum", "plant/a/temp", "plant/b/temp"}},
		{"$SYS/#", []string{"$SYS/up"}},
		{"nothing/#", nil},
	}
	for _, tt := range tests {
		s := mustSub(t, b, nil, tt.filter)
		msgs := drainAll(s)
		var got []string
		for _, m := range msgs {
			if !m.Retained || string(m.Payload) != "v:"+m.Topic {
				t.Errorf("%s: bad retained message %+v", tt.filter, m)
			}
			got = append(got, m.Topic)
		}
		if !sameSet(got, tt.want) {
			t.Errorf("Subscribe(%q) replayed %v, want %v", tt.filter, got, tt.want)
		}
		mustPublish(t, b, "plant/a/temp", "v:plant/a/temp")
	}
}

func sameSet(a, b []string) bool {
	count := map[string]int{}
	for _, x := range a {
		count[x]++
	}
	for _, x := range b {
		count[x]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestRetainedIterate(t *testing.T) {
	b := newTestBus(t, Options{})
	for i := range 10 {
		mustPublish(t, b, fmt.Sprintf("t/%d", i), "v")
	}
	mustPublish(t, b, "u/1", "v")
	count := func(filter string, stopAfter int) int {
		n := 0
		b.Retained(filter, func(m Message) bool {
			if !Match(filter, m.Topic) {
				t.Errorf("Retained(%q) gave %q", filter, m.Topic)
			}
			n++
			return n < stopAfter
		})
		return n
	}
	tests := []struct {
		filter    string
		stopAfter int
		want      int
	}{
		{"t/+", 100, 10},
		{"#", 100, 11},
		{"t/3", 100, 1},
		{"t/#", 3, 3},
		{"t/x", 100, 0},
		{"t/#/x", 100, 0},
	}
	for _, tt := range tests {
		if got := count(tt.filter, tt.stopAfter); got != tt.want {
			t.Errorf("Retained(%q) visited %d, want %d", tt.filter, got, tt.want)
		}
	}
	// fn may publish: it runs without locks.
	b.Retained("t/+", func(m Message) bool {
		mustPublish(t, b, m.Topic, "again")
		return true
	})
}

// A filter already held is not replayed again.
func TestRepeatedSubscribeDoesNotReplay(t *testing.T) {
	b := newTestBus(t, Options{})
	mustPublish(t, b, "a", "1")
	s := mustSub(t, b, nil, "a", "a")
	if err := s.Subscribe("a"); err != nil {
		t.Fatal(err)
	}
	if got := payloads(s); !equalStrings(got, []string{"a=1"}) {
		t.Fatalf("got %v, want one replay", got)
	}
	if f := s.Filters(); len(f) != 1 {
		t.Fatalf("filters = %v, want one", f)
	}
}

func TestOverlappingFiltersDeliverOnce(t *testing.T) {
	b := newTestBus(t, Options{})
	s := mustSub(t, b, nil, "a/#", "a/+", "+/b", "a/b", "#")
	other := mustSub(t, b, nil, "a/b")
	mustPublish(t, b, "a/b", "1")
	mustPublish(t, b, "a/c", "2")
	mustPublish(t, b, "x/b", "3")
	mustPublish(t, b, "a", "4")
	want := []string{"a/b=1", "a/c=2", "x/b=3", "a=4"}
	if got := payloads(s); !equalStrings(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := payloads(other); !equalStrings(got, []string{"a/b=1"}) {
		t.Fatalf("other got %v", got)
	}
	if st := b.Stats(); st.Delivered != 5 {
		t.Fatalf("Delivered = %d, want 5", st.Delivered)
	}
}

func TestUnsubscribe(t *testing.T) {
	b := newTestBus(t, Options{})
	s := mustSub(t, b, nil, "a/+", "b/#")
	if err := s.Unsubscribe("a/+"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unsubscribe("never/subscribed"); err != nil {
		t.Fatalf("Unsubscribe of an unknown filter: %v", err)
	}
	if err := s.Unsubscribe("a/#/b"); !errors.Is(err, ErrInvalidFilter) {
		t.Fatalf("Unsubscribe of a bad filter = %v", err)
	}
	mustPublish(t, b, "a/1", "x")
	mustPublish(t, b, "b/1", "y")
	if got := payloads(s); !equalStrings(got, []string{"b/1=y"}) {
		t.Fatalf("got %v", got)
	}
	s.Close()
	if !b.root.empty() {
		t.Fatal("trie not pruned after the last filter went away")
	}
}

func TestSubscribed(t *testing.T) {
	b := newTestBus(t, Options{})
	if b.Subscribed("$SYS/up") || b.Subscribed("a/b") {
		t.Fatal("Subscribed with no subscriber")
	}
	all := mustSub(t, b, nil, "#")
	if !b.Subscribed("a/b") || b.Subscribed("$SYS/up") {
		t.Fatal(`"#" must match a/b and not $SYS/up (MQTT's rule for "$" topics)`)
	}
	sys := mustSub(t, b, nil, "$SYS/+")
	if !b.Subscribed("$SYS/up") || b.Subscribed("$SYS/up/deeper") {
		t.Fatal(`"$SYS/+" must match $SYS/up and nothing deeper`)
	}
	if err := sys.Unsubscribe("$SYS/+"); err != nil {
		t.Fatal(err)
	}
	if b.Subscribed("$SYS/up") {
		t.Fatal("Subscribed after the only matching filter went away")
	}
	all.Close()
	if b.Subscribed("a/b") {
		t.Fatal("Subscribed after the subscriber closed")
	}
}

func TestCloseIdempotent(t *testing.T) {
	b := newTestBus(t, Options{})
	s := mustSub(t, b, nil, "a")
	mustPublish(t, b, "a", "1")
	s.Close()
	s.Close()
	if n := len(drainAll(s)); n != 0 {
		t.Fatalf("closed subscriber drained %d messages", n)
	}
	if err := s.Subscribe("b"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close = %v", err)
	}
	if err := s.Unsubscribe("a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Unsubscribe after Close = %v", err)
	}
	mustPublish(t, b, "a", "2")
	if st := b.Stats(); st.Subscribers != 0 || st.Delivered != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestLimits(t *testing.T) {
	b := newTestBus(t, Options{MaxFilters: 2, MaxSubscribers: 2, MaxTopicLen: 4})
	s := mustSub(t, b, nil, "a", "b")
	if err := s.Subscribe("c"); !errors.Is(err, ErrTooManyFilters) {
		t.Fatalf("third filter: %v", err)
	}
	if err := s.Subscribe("a"); err != nil {
		t.Fatalf("repeating a filter at the limit: %v", err)
	}
	if err := s.Subscribe("abcde"); !errors.Is(err, ErrInvalidFilter) {
		t.Fatalf("filter past MaxTopicLen: %v", err)
	}
	s2 := mustSub(t, b, nil)
	if _, err := b.NewSubscriber(nil); !errors.Is(err, ErrTooManySubscribers) {
		t.Fatalf("third subscriber: %v", err)
	}
	s2.Close()
	if _, err := b.NewSubscriber(nil); err != nil {
		t.Fatalf("Close did not free a subscriber slot: %v", err)
	}
}

func TestNotify(t *testing.T) {
	b := newTestBus(t, Options{})
	var calls atomic.Int32
	s := mustSub(t, b, func() { calls.Add(1) }, "a")
	mustPublish(t, b, "a", "1")
	mustPublish(t, b, "a", "2")
	if n := calls.Load(); n != 1 {
		t.Fatalf("notify called %d times for one empty->non-empty edge", n)
	}
	drainAll(s)
	mustPublish(t, b, "a", "3")
	if n := calls.Load(); n != 2 {
		t.Fatalf("notify called %d times, want 2 after a drain", n)
	}
	if err := s.Subscribe("b"); err != nil {
		t.Fatal(err)
	}
	drainAll(s)
	mustPublish(t, b, "b", "1")
	if err := s.Subscribe("b"); err != nil { // held already: no replay
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("notify called %d times, want 3 (publish to b; a repeated Subscribe replays nothing)", n)
	}
	if err := s.Subscribe("c"); err != nil { // nothing cached: nothing to replay
		t.Fatal(err)
	}
	drainAll(s)
	if err := s.Subscribe("#"); err != nil { // a replay into an empty queue
		t.Fatal(err)
	}
	if n := calls.Load(); n != 4 {
		t.Fatalf("notify called %d times, want 4 (the replay of #)", n)
	}
}

func TestQueueGrowsLazily(t *testing.T) {
	b := newTestBus(t, Options{Queue: 40})
	s := mustSub(t, b, nil, "#")
	if s.ring != nil {
		t.Fatal("idle subscriber allocated a queue")
	}
	sizes := []int{}
	for i := range 40 {
		mustPublish(t, b, "t", fmt.Sprint(i))
		if len(sizes) == 0 || sizes[len(sizes)-1] != len(s.ring) {
			sizes = append(sizes, len(s.ring))
		}
	}
	if fmt.Sprint(sizes) != "[2 4 8 16 32 40]" {
		t.Fatalf("ring sizes %v, want [2 4 8 16 32 40]", sizes)
	}
	msgs := drainAll(s)
	for i, m := range msgs {
		if string(m.Payload) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q: order lost while growing", i, m.Payload)
		}
	}
}

func TestSetQueueAndIdleRelease(t *testing.T) {
	b := newTestBus(t, Options{Queue: 256})
	s := mustSub(t, b, nil, "#")
	s.SetQueue(20)
	for i := range 50 {
		mustPublish(t, b, "t", fmt.Sprint(i))
	}
	if len(s.ring) != 20 || s.Dropped() != 30 {
		t.Fatalf("ring %d dropped %d; want the subscriber's own limit 20 and 30 dropped", len(s.ring), s.Dropped())
	}
	if msgs := drainAll(s); len(msgs) != 20 || string(msgs[0].Payload) != "30" {
		t.Fatalf("drained %d, first %q", len(msgs), msgs[0].Payload)
	}
	if s.ring != nil {
		t.Fatal("a drained subscriber kept its queue")
	}
	mustPublish(t, b, "t", "again")
	if len(s.ring) != firstRing || s.Len() != 1 {
		t.Fatalf("after release: ring %d len %d", len(s.ring), s.Len())
	}
}

func TestDropPolicies(t *testing.T) {
	tests := []struct {
		policy       DropPolicy
		want         []string
		dropped      uint64
		disconnected bool
	}{
		{DropOldest, []string{"t=3", "t=4", "t=5", "t=6"}, 2, false},
		{DropNewest, []string{"t=1", "t=2", "t=3", "t=4"}, 2, false},
		{Disconnect, nil, 5, true},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			b := newTestBus(t, Options{Queue: 4, Drop: tt.policy})
			var calls atomic.Int32
			s := mustSub(t, b, func() { calls.Add(1) }, "t")
			healthy := mustSub(t, b, nil, "t")
			for i := 1; i <= 6; i++ {
				mustPublish(t, b, "t", fmt.Sprint(i))
				if i == 4 {
					drainAll(healthy)
				}
			}
			if got := payloads(s); !equalStrings(got, tt.want) {
				t.Errorf("queue %v, want %v", got, tt.want)
			}
			if s.Dropped() != tt.dropped || s.Disconnected() != tt.disconnected {
				t.Errorf("Dropped %d Disconnected %v, want %d %v",
					s.Dropped(), s.Disconnected(), tt.dropped, tt.disconnected)
			}
			if healthy.Dropped() != 0 || healthy.Len() != 2 {
				t.Errorf("a subscriber that kept up lost messages: dropped %d len %d",
					healthy.Dropped(), healthy.Len())
			}
			st := b.Stats()
			wantStats := Stats{Published: 6, Delivered: 6 + 6 - tt.dropped, Dropped: tt.dropped, Topics: 1, Subscribers: 2}
			if tt.policy == DropOldest {
				wantStats.Delivered = 12 // every message was queued; two were evicted later
			}
			if tt.disconnected {
				wantStats.Delivered = 6 + 4
				wantStats.Disconnected = 1
				wantStats.Subscribers = 1
				if calls.Load() != 2 {
					t.Errorf("notify called %d times, want 2 (first message, disconnect)", calls.Load())
				}
				if err := s.Subscribe("u"); !errors.Is(err, ErrClosed) {
					t.Errorf("Subscribe after disconnect = %v", err)
				}
			}
			if st != wantStats {
				t.Errorf("stats %+v, want %+v", st, wantStats)
			}
		})
	}
}

// A replay is read as the subscriber drains, so it never overflows the
// queue, even a tiny one under the Disconnect policy.
func TestReplayNeverOverflowsTheQueue(t *testing.T) {
	b := newTestBus(t, Options{Queue: 2, Drop: Disconnect})
	for i := range 3 {
		mustPublish(t, b, fmt.Sprintf("t/%d", i), "v")
	}
	s := mustSub(t, b, nil, "t/+")
	var got []Message
	for {
		batch := s.Drain(got, 1)
		if len(batch.Msgs) != len(got)+1 && batch.More {
			t.Fatalf("a one-byte budget took %d messages", len(batch.Msgs)-len(got))
		}
		got = batch.Msgs
		if !batch.More {
			break
		}
	}
	if len(got) != 3 || s.Disconnected() || s.Dropped() != 0 {
		t.Fatalf("replayed %d, disconnected %v, dropped %d", len(got), s.Disconnected(), s.Dropped())
	}
}

// A queue that grew through the pooled sizes and was drained leaves only
// zeroed rings in the pools, so pooled storage pins no payload, and the
// messages came out in order across every growth.
func TestRingsComeBackEmpty(t *testing.T) {
	b := New(Options{Queue: 64})
	s, err := b.NewSubscriber(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Subscribe("r"); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		mustPublish(t, b, "r", fmt.Sprint(i))
	}
	msgs := drainAll(s)
	for i, m := range msgs {
		if string(m.Payload) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q", i, m.Payload)
		}
	}
	if len(msgs) != 40 || s.ring != nil {
		t.Fatalf("drained %d, ring kept %v", len(msgs), s.ring != nil)
	}
	for size := 2; size <= maxPooledRing; size *= 2 {
		for _, r := range getRing(size) {
			if r != (run{}) {
				t.Fatalf("a pooled ring of %d holds %q", size, r.first.Payload)
			}
		}
	}
}
