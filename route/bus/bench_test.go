package bus

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// benchFilters are spread over the subscribers so fan-out walks exact,
// "+" and "#" branches of the trie.
var benchFilters = []string{"plant/line1/temp", "plant/+/temp", "plant/#", "#"}

// fanOutBus returns a bus with n subscribers all matching
// "plant/line1/temp", their queues already full so the steady state
// (DropOldest evicting) is what gets measured.
func fanOutBus(tb testing.TB, n int) (*Bus, []byte) {
	tb.Helper()
	b := New(Options{MaxSubscribers: n + 1, Queue: 256})
	for i := range n {
		s, err := b.NewSubscriber(func() {})
		if err != nil {
			tb.Fatal(err)
		}
		if err := s.Subscribe(benchFilters[i%len(benchFilters)]); err != nil {
			tb.Fatal(err)
		}
	}
	payload := make([]byte, 64)
	for range b.Options().Queue + 1 {
		if err := b.Publish("plant/line1/temp", payload, "bench"); err != nil {
			tb.Fatal(err)
		}
	}
	return b, payload
}

func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{0, 1, 100, 10000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			bus, payload := fanOutBus(b, n)
			b.ReportAllocs()
			for b.Loop() {
				if err := bus.Publish("plant/line1/temp", payload, "bench"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*max(n, 1)), "ns/delivery")
		})
	}
}

// BenchmarkPublishParallel has every goroutine publish its own topics to a
// shared set of 100 subscribers: the contended path.
func BenchmarkPublishParallel(b *testing.B) {
	bus, payload := fanOutBus(b, 100)
	var id atomic.Int32
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		topics := make([]string, 16)
		g := id.Add(1)
		for i := range topics {
			topics[i] = fmt.Sprintf("plant/line%d-%d/temp", g, i)
		}
		for i := 0; pb.Next(); i++ {
			if err := bus.Publish(topics[i%len(topics)], payload, "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkGet(b *testing.B) {
	bus, _ := fanOutBus(b, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := bus.Get("plant/line1/temp"); !ok {
			b.Fatal("no value")
		}
	}
}

// BenchmarkPublishDrain is one publisher and one subscriber that drains
// every 64 messages into a reused buffer.
func BenchmarkPublishDrain(b *testing.B) {
	bus, payload := fanOutBus(b, 0)
	s, err := bus.NewSubscriber(nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Subscribe("plant/+/temp"); err != nil {
		b.Fatal(err)
	}
	buf := make([]Message, 0, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := bus.Publish("plant/line1/temp", payload, "bench"); err != nil {
			b.Fatal(err)
		}
		if i%64 == 63 {
			buf = s.Drain(buf[:0], 0).Msgs
		}
	}
}

// TestPublishAllocs pins the hot path's allocations: the one payload copy
// and nothing per subscriber.
func TestPublishAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	bus, payload := fanOutBus(t, 100)
	if allocs := testing.AllocsPerRun(200, func() {
		_ = bus.Publish("plant/line1/temp", payload, "bench")
	}); allocs != 3 {
		t.Errorf("Publish to 100 subscribers: %v allocations, want 3 (the payload copy, the message they share, "+
			"the cache's weak pointer to it as its chain's tail)", allocs)
	}
	if allocs := testing.AllocsPerRun(200, func() {
		_ = bus.Publish("plant/line1/temp", nil, "bench")
	}); allocs != 2 {
		t.Errorf("Publish of an empty payload: %v allocations, want 2 (the message, its weak pointer)", allocs)
	}
	if allocs := testing.AllocsPerRun(200, func() {
		_ = bus.Publish("$none/x", nil, "bench") // "$" escapes the "#" subscribers
	}); allocs != 0 {
		t.Errorf("Publish of an empty payload nobody reads: %v allocations, want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(200, func() {
		bus.Get("plant/line1/temp")
	}); allocs != 0 {
		t.Errorf("Get: %v allocations, want 0", allocs)
	}
}

// BenchmarkSubscribeClose is a connection's life on the bus without its
// messages: a subscriber made, one exact filter subscribed (its retained
// value replayed), the subscriber closed. Subscribing and detaching take
// the trie lock for writing: every one of its stripes (trieLock).
func BenchmarkSubscribeClose(b *testing.B) {
	bus := New(Options{})
	if err := bus.Publish("plant/line1/temp", []byte("21.5"), "bench"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s, err := bus.NewSubscriber(nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Subscribe("plant/line1/temp"); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
