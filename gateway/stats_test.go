package gateway

import (
	"encoding/json"
	"testing"
)

// TestStatsOnlyForSubscribers: the stats snapshot is published while
// someone subscribes to its topic, and the cache keeps no snapshot nobody
// refreshes.
func TestStatsOnlyForSubscribers(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	b := g.Bus()
	g.statsTick()
	if _, ok := b.Get(StatsTopic); ok {
		t.Fatal("a snapshot was published with nobody subscribed")
	}

	s, err := b.NewSubscriber(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SubscribeLive("$SYS/#"); err != nil {
		t.Fatal(err)
	}
	g.statsTick()
	if _, ok := b.Get(StatsTopic); !ok {
		t.Fatal("no snapshot in the cache with a subscriber")
	}
	msgs := s.Drain(nil, 0).Msgs
	if len(msgs) == 0 {
		t.Fatal("the subscriber got no snapshot")
	}
	var st Stats
	if err := json.Unmarshal(msgs[len(msgs)-1].Payload, &st); err != nil || st.Time == 0 {
		t.Fatalf("snapshot %q: %v", msgs[len(msgs)-1].Payload, err)
	}

	// The gateway's own ticker may be mid-publish as the subscriber goes,
	// so the first tick after may still find a snapshot; the next forgets
	// it.
	s.Close()
	eventually(t, "the last snapshot forgotten after its subscriber left", func() bool {
		g.statsTick()
		_, ok := b.Get(StatsTopic)
		return !ok
	})
}
