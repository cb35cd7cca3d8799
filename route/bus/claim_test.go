package bus

import (
	"errors"
	"testing"
)

// recordingWriter takes writes, refusing topics in refuse.
type recordingWriter struct {
	got    []string
	refuse map[string]error
}

func (w *recordingWriter) Write(topic string, payload []byte, src string) error {
	if err := w.refuse[topic]; err != nil {
		return err
	}
	w.got = append(w.got, topic+"="+string(payload)+" from "+src)
	return nil
}

// TestClaimedTopicWrites: a publish to a claimed topic by anyone but its
// owner reaches the Writer and neither the cache nor subscribers; the
// owner's publishes are values as usual; a refusal comes back to the
// publisher; a topic has one owner; releasing the claim restores plain
// publishing.
func TestClaimedTopicWrites(t *testing.T) {
	b := newTestBus(t, Options{})
	s := mustSub(t, b, nil, "dev/#")
	w := &recordingWriter{refuse: map[string]error{"dev/ro": ErrNotWritable}}
	if err := b.Claim("poller", []string{"dev/sp", "dev/ro"}, w); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish("dev/sp", []byte("1"), "poller"); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish("dev/sp", []byte("22.5"), "ws"); err != nil {
		t.Fatalf("accepted write: %v", err)
	}
	if err := b.Publish("dev/ro", []byte("3"), "coap"); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("refused write: got %v", err)
	}
	if m, _ := b.Get("dev/sp"); string(m.Payload) != "1" {
		t.Fatalf("cache holds %q after a write, want the owner's 1", m.Payload)
	}
	if _, ok := b.Get("dev/ro"); ok {
		t.Fatal("a refused write left a value in the cache")
	}
	if len(w.got) != 1 || w.got[0] != "dev/sp=22.5 from ws" {
		t.Fatalf("writer got %q", w.got)
	}
	if msgs := drainAll(s); len(msgs) != 1 || string(msgs[0].Payload) != "1" {
		t.Fatalf("subscriber got %d messages, want only the owner's", len(msgs))
	}
	if err := b.Claim("other", []string{"dev/sp"}, w); err == nil {
		t.Fatal("a second owner claimed a claimed topic")
	}
	if err := b.Claim("poller", nil, nil); err != nil || b.Claimed("dev/sp") {
		t.Fatalf("release: %v, still claimed %v", err, b.Claimed("dev/sp"))
	}
	if err := b.Publish("dev/ro", []byte("3"), "coap"); err != nil {
		t.Fatal(err)
	}
	if m, ok := b.Get("dev/ro"); !ok || string(m.Payload) != "3" {
		t.Fatal("released topic: publish not cached")
	}
}
