package bus

import (
	"fmt"
	"slices"
	"testing"
)

// TestRouteFollowsSubscriptions: a publisher on a Route reaches exactly
// the subscribers a publisher without one would, whatever changes
// between its publishes: subscriptions made and removed, subscribers
// closed, its topic forgotten by the cache, another topic between two
// publishes, more subscribers than a Route remembers.
func TestRouteFollowsSubscriptions(t *testing.T) {
	b := newTestBus(t, Options{})
	var r Route
	n := 0
	publish := func(topic string) string {
		t.Helper()
		n++
		p := fmt.Sprint(n)
		if err := b.PublishRoute(&r, nil, []byte(topic), []byte(p), "test"); err != nil {
			t.Fatal(err)
		}
		return p
	}
	expect := func(s *Subscriber, want ...string) {
		t.Helper()
		var got []string
		for _, m := range drainAll(s) {
			got = append(got, string(m.Payload))
		}
		if !equalStrings(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}

	publish("a/b")
	publish("a/b") // the Route remembers: no subscriber
	s1 := mustSub(t, b, nil, "a/b")
	expect(s1, "2") // the retained value
	p := publish("a/b")
	expect(s1, p)
	p = publish("a/b") // from the Route's list
	expect(s1, p)
	if r.subsAt == 0 || !slices.Contains(r.single, s1) {
		t.Fatalf("the Route remembers %v (at %d), want s1", r.single, r.subsAt)
	}

	s2 := mustSub(t, b, nil, "a/+", "a/#") // several filters: deduplicated
	drainAll(s2)                           // the retained value
	p = publish("a/b")
	expect(s1, p)
	expect(s2, p)
	p = publish("a/b")
	expect(s1, p)
	expect(s2, p)

	if err := s1.Unsubscribe("a/b"); err != nil {
		t.Fatal(err)
	}
	p = publish("a/b")
	expect(s1)
	expect(s2, p)
	s2.Close()
	publish("a/b")
	publish("a/b")
	expect(s2)

	// The cache forgets the topic: the next publish stores it anew, and
	// counts it.
	if !b.Forget("a/b") || b.Stats().Topics != 0 {
		t.Fatalf("Forget: %d topics", b.Stats().Topics)
	}
	s3 := mustSub(t, b, nil, "a/b")
	p = publish("a/b")
	if m, ok := b.Get("a/b"); !ok || string(m.Payload) != p || b.Stats().Topics != 1 {
		t.Fatalf("after Forget: cached %q %v, %d topics", m.Payload, ok, b.Stats().Topics)
	}
	expect(s3, p)

	// Another topic between two publishes.
	s4 := mustSub(t, b, nil, "c")
	pc := publish("c")
	p = publish("a/b")
	expect(s4, pc)
	expect(s3, p)

	// More subscribers than a Route remembers: all are reached, none is
	// remembered.
	var many []*Subscriber
	for range maxRouteSubs + 6 {
		many = append(many, mustSub(t, b, nil, "f"))
	}
	for range 3 {
		p = publish("f")
		for _, s := range many {
			expect(s, p)
		}
	}
	if r.subsAt != 0 || len(r.single) != 0 {
		t.Fatalf("the Route remembers %d subscribers of %d", len(r.single), len(many))
	}
}

// TestRouteForgetsClosedSubscribers: a Route lets go of a subscriber
// with its next publish after the subscriber left.
func TestRouteForgetsClosedSubscribers(t *testing.T) {
	b := newTestBus(t, Options{})
	var r Route
	s := mustSub(t, b, nil, "t")
	for range 2 {
		if err := b.PublishRoute(&r, nil, []byte("t"), []byte("v"), "test"); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(r.single, s) {
		t.Fatal("the Route did not remember the subscriber")
	}
	s.Close()
	if err := b.PublishRoute(&r, nil, []byte("t"), []byte("v"), "test"); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(r.single[:cap(r.single)], s) {
		t.Fatal("the Route still holds the closed subscriber")
	}
}
