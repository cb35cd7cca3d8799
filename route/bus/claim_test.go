package bus

import (
	"errors"
	"fmt"
	"testing"
)

// recordingWriter takes writes, refusing topics in refuse.
// The done of each accepted write is kept in dones, to be called by the
// test as the device would.
type recordingWriter struct {
	got    []string
	refuse map[string]error
	dones  []func(error)
}

func (w *recordingWriter) Write(topic string, payload []byte, src string, done func(error)) error {
	if err := w.refuse[topic]; err != nil {
		return err
	}
	w.got = append(w.got, topic+"="+string(payload)+" from "+src)
	w.dones = append(w.dones, done)
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

// TestPublishDone: a value is done before PublishDone returns; a write to
// a claimed topic is done when the Writer says, with its outcome; a
// refused write or an invalid topic is an error and never done; a plain
// publish passes the Writer no done.
func TestPublishDone(t *testing.T) {
	b := newTestBus(t, Options{})
	w := &recordingWriter{refuse: map[string]error{"dev/ro": ErrNotWritable}}
	if err := b.Claim("poller", []string{"dev/sp", "dev/ro"}, w); err != nil {
		t.Fatal(err)
	}
	var outcomes []error
	record := func(err error) { outcomes = append(outcomes, err) }
	if err := b.PublishDone(nil, "plain/v", []byte("1"), "ws", record); err != nil || len(outcomes) != 1 || outcomes[0] != nil {
		t.Fatalf("a value: %v, outcomes %v", err, outcomes)
	}
	if err := b.PublishDone(nil, "dev/sp", []byte("2"), "ws", record); err != nil || len(outcomes) != 1 {
		t.Fatalf("a write: %v, outcomes %v before the device answered", err, outcomes)
	}
	failed := fmt.Errorf("%w: exception 0x02", ErrWriteFailed)
	w.dones[0](failed)
	if len(outcomes) != 2 || !errors.Is(outcomes[1], ErrWriteFailed) {
		t.Fatalf("the write's outcome: %v", outcomes)
	}
	if err := b.PublishDone(nil, "dev/ro", []byte("3"), "ws", record); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("a refused write: %v", err)
	}
	if err := b.PublishDone(nil, "bad/#", []byte("3"), "ws", record); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("an invalid topic: %v", err)
	}
	if len(outcomes) != 2 || len(w.dones) != 1 {
		t.Fatalf("refusals were done: %v", outcomes)
	}
	if err := b.Publish("dev/sp", []byte("4"), "ws"); err != nil || len(w.dones) != 2 || w.dones[1] != nil {
		t.Fatalf("a plain publish's write: %v, done %v", err, w.dones)
	}
}
