package bus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// recycling returns a subscriber of filters whose owner Releases.
func recycling(t *testing.T, b *Bus, filters ...string) *Subscriber {
	t.Helper()
	s := mustSub(t, b, nil)
	s.Recycle()
	for _, f := range filters {
		if err := s.Subscribe(f); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// cachedBuf is the buffer of topic's cached value, read as the cache
// holds it (nil: the collector's array).
func cachedBuf(b *Bus, topic string) *payloadBuf {
	sh := b.shardFor(topic)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return sh.m[topic].msg.buf
}

func wantRefs(t *testing.T, what string, p *payloadBuf, want int32) {
	t.Helper()
	if p == nil {
		t.Fatalf("%s: no pooled buffer", what)
	}
	if got := p.refs.Load(); got != want {
		t.Errorf("%s: %d holds (pinned %v), want %d (pinned %v)",
			what, got&^pinnedRefs, got&pinnedRefs != 0, want&^pinnedRefs, want&pinnedRefs != 0)
	}
}

// A lone recycling subscriber's delivery is held by the cache and the
// queue (then the owner), and goes back to the pool when both let go,
// in either order; everyone else's payloads stay the collector's.
func TestRecycledPayloadHolds(t *testing.T) {
	b := newTestBus(t, Options{})
	s := recycling(t, b, "t")
	mustPublish(t, b, "t", "a")
	msgs := drainAll(s)
	if len(msgs) != 1 || string(msgs[0].Payload) != "a" {
		t.Fatalf("drained %v", msgs)
	}
	a := msgs[0].buf
	wantRefs(t, "drained, cached", a, 2)
	mustPublish(t, b, "t", "b") // the cache lets a go
	wantRefs(t, "drained, replaced in the cache", a, 1)
	s.Release(msgs)
	wantRefs(t, "released", a, 0)
	if msgs[0].buf != nil || msgs[0].Payload != nil {
		t.Errorf("a released message still names its payload: %+v", msgs[0])
	}
	s.Release(msgs) // twice: nothing more to drop
	wantRefs(t, "released twice", a, 0)

	// The other order: released first, then replaced in the cache.
	bmsgs := drainAll(s)
	bb := bmsgs[0].buf
	s.Release(bmsgs)
	wantRefs(t, "released, still cached", bb, 1)
	mustPublish(t, b, "t", "c")
	wantRefs(t, "released, replaced", bb, 0)

	// Forget drops the cache's hold.
	c := cachedBuf(b, "t")
	if !b.Forget("t") {
		t.Fatal("Forget found no value")
	}
	wantRefs(t, "forgotten, queued", c, 1)
	s.Release(drainAll(s))
	wantRefs(t, "forgotten, released", c, 0)

	// Not pooled: an owner that does not Release, two subscribers, an
	// empty payload, one too big for the pools.
	plain := mustSub(t, b, nil, "u")
	mustPublish(t, b, "u", "x")
	if m := drainAll(plain); m[0].buf != nil {
		t.Error("a subscriber that does not Release got a pooled payload")
	}
	second := mustSub(t, b, nil, "t")
	mustPublish(t, b, "t", "shared")
	if m := drainAll(s); m[0].buf != nil || string(m[0].Payload) != "shared" {
		t.Errorf("a message two subscribers share was pooled: %+v", m[0])
	}
	drainAll(second)
	second.Close()
	mustPublish(t, b, "t", "")
	if m := drainAll(s); m[0].buf != nil {
		t.Error("an empty payload was pooled")
	}
	big := make([]byte, maxPooled+1)
	if err := b.Publish("t", big, "test"); err != nil {
		t.Fatal(err)
	}
	if m := drainAll(s); m[0].buf != nil || len(m[0].Payload) != len(big) {
		t.Error("a payload over maxPooled was pooled")
	}
	mustPublish(t, b, "t", string(make([]byte, maxPooled)))
	if m := drainAll(s); m[0].buf == nil || cap(m[0].Payload) != maxPooled {
		t.Errorf("a payload of maxPooled bytes was not pooled in its class")
	}
}

// A cached value that leaves the bus (Get, a replay, Retained) pins its
// buffer: the reader is not counted, so the buffer must never return to
// a pool while the reader may still hold it.
func TestRecycledPayloadPinnedWhenRead(t *testing.T) {
	read := map[string]func(b *Bus, s *Subscriber) []byte{
		"Get": func(b *Bus, _ *Subscriber) []byte {
			m, ok := b.Get("t")
			if !ok || m.buf != nil {
				panic("Get handed out a counted buffer")
			}
			return m.Payload
		},
		"replay": func(b *Bus, _ *Subscriber) []byte {
			late, err := b.NewSubscriber(nil)
			if err != nil {
				panic(err)
			}
			defer late.Close()
			late.Recycle() // a replay is never counted, recycling owner or not
			if err := late.Subscribe("t"); err != nil {
				panic(err)
			}
			m := late.Drain(nil, 0).Msgs
			if len(m) != 1 || !m[0].Retained || m[0].buf != nil {
				panic(fmt.Sprintf("replay handed out %+v", m))
			}
			return m[0].Payload
		},
		"Retained": func(b *Bus, _ *Subscriber) (p []byte) {
			b.Retained("#", func(m Message) bool {
				if m.buf != nil {
					panic("Retained handed out a counted buffer")
				}
				p = m.Payload
				return false
			})
			return p
		},
	}
	for name, readValue := range read {
		t.Run(name, func(t *testing.T) {
			b := newTestBus(t, Options{})
			s := recycling(t, b, "t")
			mustPublish(t, b, "t", "kept")
			kept := readValue(b, s)
			msgs := drainAll(s)
			buf := msgs[0].buf
			s.Release(msgs)
			mustPublish(t, b, "t", "next")
			wantRefs(t, "read, released, replaced", buf, pinnedRefs)
			// Were it recycled, these publishes of the same size would
			// reuse it.
			for i := range 64 {
				mustPublish(t, b, "t", fmt.Sprintf("%04d", i))
				s.Release(drainAll(s))
			}
			if string(kept) != "kept" {
				t.Errorf("the value read is now %q", kept)
			}
		})
	}
}

// Each way a queue lets a message go without its owner taking it drops
// the queue's hold; a disconnected queue's holds go to the collector.
func TestRecycledPayloadDropPaths(t *testing.T) {
	t.Run("oldest", func(t *testing.T) {
		b := newTestBus(t, Options{Queue: 1, Drop: DropOldest})
		recycling(t, b, "t")
		mustPublish(t, b, "t", "a")
		a := cachedBuf(b, "t")
		mustPublish(t, b, "t", "b") // evicts a from the queue and the cache
		wantRefs(t, "evicted", a, 0)
		wantRefs(t, "queued", cachedBuf(b, "t"), 2)
	})
	t.Run("newest", func(t *testing.T) {
		b := newTestBus(t, Options{Queue: 1, Drop: DropNewest})
		s := recycling(t, b, "t")
		mustPublish(t, b, "t", "a")
		a := cachedBuf(b, "t")
		mustPublish(t, b, "t", "b") // the queue refuses b
		wantRefs(t, "queued, replaced", a, 1)
		wantRefs(t, "refused by the queue", cachedBuf(b, "t"), 1)
		s.Release(drainAll(s))
		wantRefs(t, "queued, released", a, 0)
	})
	t.Run("disconnect", func(t *testing.T) {
		b := newTestBus(t, Options{Queue: 1, Drop: Disconnect})
		s := recycling(t, b, "t")
		mustPublish(t, b, "t", "a")
		a := cachedBuf(b, "t")
		mustPublish(t, b, "t", "b") // cuts s off, its queue dropped
		if !s.Disconnected() {
			t.Fatal("not cut off")
		}
		wantRefs(t, "dropped with the queue", a, 1) // the collector takes it
		wantRefs(t, "refused by the cut queue", cachedBuf(b, "t"), 1)
	})
	t.Run("refused", func(t *testing.T) {
		b := newTestBus(t, Options{MaxTopics: 1})
		s := recycling(t, b, "#")
		mustPublish(t, b, "t", "a")
		s.Release(drainAll(s))
		if err := b.Publish("u", []byte("over"), "test"); !errors.Is(err, ErrCacheFull) {
			t.Fatalf("Publish past MaxTopics = %v", err)
		}
		if m := drainAll(s); len(m) != 0 {
			t.Errorf("a refused publish was delivered: %v", m)
		}
	})
}

// Many publishers to a lone recycling subscriber's topics, which it
// drains, checks and releases, while others Get, replay and iterate the
// same topics and check what they keep: a buffer recycled while anyone
// could still read it shows up as a payload that is not its own.
func TestRecycledPayloadsStayIntact(t *testing.T) {
	const topics, publishers, perPublisher, kept = 8, 3, 4000, 32
	b := newTestBus(t, Options{Queue: 64, QueueBytes: 64 << 10})
	s := recycling(t, b, "echo/#")

	// A payload names its topic and number and fills the rest from them.
	payload := func(topic, n int) []byte {
		p := make([]byte, 8+(n*7+topic)%1500)
		binary.LittleEndian.PutUint32(p, uint32(topic))
		binary.LittleEndian.PutUint32(p[4:], uint32(n))
		for i := 8; i < len(p); i++ {
			p[i] = byte(topic*31 + n + i)
		}
		return p
	}
	var failed atomic.Bool
	check := func(who string, p []byte) {
		if len(p) < 8 {
			failed.Store(true)
			t.Errorf("%s: payload of %d bytes", who, len(p))
			return
		}
		topic, n := int(binary.LittleEndian.Uint32(p)), int(binary.LittleEndian.Uint32(p[4:]))
		if want := payload(topic, n); string(p) != string(want) {
			failed.Store(true)
			t.Errorf("%s: payload of topic %d number %d changed under its reader", who, topic, n)
		}
	}

	var pubs sync.WaitGroup
	for g := range publishers {
		pubs.Go(func() {
			for n := range perPublisher {
				topic := (g*perPublisher + n) % topics
				if err := b.Publish(fmt.Sprintf("echo/%d", topic), payload(topic, n), "test"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() { // the owner: drain, check, release
		var buf []Message
		for {
			batch := s.Drain(buf[:0], 4096)
			for _, m := range batch.Msgs {
				check("owner", m.Payload)
			}
			s.Release(batch.Msgs)
			buf = batch.Msgs
			select {
			case <-done:
				if len(batch.Msgs) == 0 {
					return
				}
			default:
			}
		}
	})
	readers.Go(func() { // Get, keeping the last values read
		var held [][]byte
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			if m, ok := b.Get(fmt.Sprintf("echo/%d", rng.IntN(topics))); ok {
				held = append(held, m.Payload)
				if len(held) > kept {
					held = held[1:]
				}
			}
			for _, p := range held {
				check("Get", p)
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	readers.Go(func() { // replays and Retained, keeping what they read
		var held [][]byte
		for {
			late, err := b.NewSubscriber(nil)
			if err != nil {
				t.Error(err)
				return
			}
			_ = late.Subscribe("echo/#")
			for _, m := range late.Drain(nil, 0).Msgs {
				held = append(held, m.Payload)
			}
			late.Close()
			b.Retained("echo/#", func(m Message) bool {
				held = append(held, m.Payload)
				return true
			})
			if len(held) > kept {
				held = held[len(held)-kept:]
			}
			for _, p := range held {
				check("replay", p)
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	pubs.Wait()
	close(done)
	readers.Wait()
	if failed.Load() {
		return
	}
	if st := b.Stats(); st.Published != publishers*perPublisher {
		t.Errorf("published %d, want %d", st.Published, publishers*perPublisher)
	}
}
