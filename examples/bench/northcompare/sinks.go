package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/north"
)

// The rows: a sink carrying the bus's messages to a broker, live and from
// a store's backlog.

// newSink makes a sink of kind (on stream: JetStream) on a bus big enough
// to take a burst of n.
func (b *benchmark) newSink(url, kind, stream string, store bool) (*bus.Bus, *north.Set) {
	bb := bus.New(bus.Options{Queue: b.n + 1, QueueBytes: 1 << 30, MaxTopics: b.topics + 100, TopicQuota: b.topics + 100})
	b.runs++
	sc := config.NorthSink{Name: "bench" + strconv.Itoa(b.runs), Kind: kind, URL: url, Inflight: b.inflight,
		JetStream: config.NorthJetStream{Stream: stream},
		Map:       []config.NorthMap{{From: "bench/#", To: "{topic}", QoS: 1}}}
	if store {
		sc.Store = config.NorthStore{Enabled: true, Dir: filepath.Join(b.dir, sc.Name), DrainRate: 1000000, Sync: "interval"}
	}
	cfg := config.Defaults()
	cfg.DataDir = b.dir
	cfg.North.Sinks = []config.NorthSink{sc}
	cfg.Normalize()
	check(cfg.Validate())
	set, err := north.Build(cfg.North, "bench", bb, nil, slog.New(slog.DiscardHandler))
	check(err)
	return bb, set
}

// sink: the bus publishes, a sink carries them to the broker.
func (b *benchmark) sink(url, kind, stream string, store bool) result {
	rc := b.receive(url, kind, stream)
	defer rc.close()
	return b.timeSink(url, kind, stream, store, func(*north.Set) { rc.wait(b.n) })
}

// sinkToAcked: the bus publishes, a sink carries them to the broker,
// timed as the broker's own benchmark client times itself: from the
// first publish until the sink counts every message published (core
// NATS: its last flush has returned, the server read them; MQTT: every
// PUBACK is in), with no subscriber for the broker to deliver to.
func (b *benchmark) sinkToAcked(url, kind string, store bool) result {
	return b.timeSink(url, kind, "", store, func(set *north.Set) { waitPublished(set, b.n) })
}

// waitPublished waits until the sink counts n published: settled by a
// flush the server answered (core NATS) or a PUBACK (MQTT).
func waitPublished(set *north.Set, n int) {
	for deadline := time.Now().Add(5 * time.Minute); set.Stats()[0].Published < uint64(n); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("only %d of %d published", set.Stats()[0].Published, n))
		}
	}
}

// timeSink starts a sink, publishes n messages on the bus and times them
// from the first publish until done returns.
func (b *benchmark) timeSink(url, kind, stream string, store bool, done func(*north.Set)) result {
	bb, set := b.newSink(url, kind, stream, store)
	set.Start()
	defer set.Close()
	waitUp(set)
	start := time.Now()
	for i := range b.n {
		check(bb.Publish(b.topic(i), b.payload, "bench"))
	}
	done(set)
	return result{count: b.n, d: time.Since(start)}
}

// relayed is a sink of kind reaching the broker at url through a relay
// that refuses connections until opened: the broker unreachable.
func (b *benchmark) relayed(url, kind string) (*relay, *bus.Bus, *north.Set) {
	scheme, hostport, _ := strings.Cut(url, "://")
	r := newRelay(hostport)
	bb, set := b.newSink(scheme+"://"+r.addr(), kind, "", true)
	set.Start()
	return r, bb, set
}

// drainFrom opens the relay and times the backlog of count from the
// link up until arrived(count) returns (the reconnect's backoff, up to
// 5 s after a long outage, is not the drain's: it is printed).
func drainFrom(r *relay, set *north.Set, arrived func(int), count int) result {
	opened, cpu := time.Now(), cpuTime()
	r.open.Store(true)
	waitUp(set)
	start := time.Now()
	arrived(count)
	return result{count: count, d: time.Since(start), note: fmt.Sprintf("; link back %v after the broker", start.Sub(opened).Round(time.Millisecond)), cpu: cpuTime() - cpu}
}

// drain: n messages queued at once while the broker is unreachable, then
// the link lets up, drain_rate unlimited.
func (b *benchmark) drain(url, kind string) result {
	rc := b.receive(url, kind, "")
	defer rc.close()
	r, bb, set := b.relayed(url, kind)
	defer set.Close()
	for i := range b.n {
		check(bb.Publish(b.topic(i), b.payload, "bench"))
	}
	waitQueued(set, b.n)
	return drainFrom(r, set, rc.wait, b.n)
}

// outageDrain: the broker unreachable for the outage while the bus
// publishes at a steady rate into the store, then the broker back and the
// backlog's drain timed until a subscriber has it all.
func (b *benchmark) outageDrain(url, kind string) result {
	rc := b.receive(url, kind, "")
	defer rc.close()
	r, set, sent := b.backlogOfOutage(url, kind)
	defer set.Close()
	return drainFrom(r, set, rc.wait, sent)
}

// outageDrainToFlush: the same backlog drained to core NATS, timed as
// `nats bench pub` times itself: until the sink's last flush has returned
// for every message, with no subscriber for the server to deliver to.
func (b *benchmark) outageDrainToFlush(url string) result {
	r, set, sent := b.backlogOfOutage(url, "nats")
	defer set.Close()
	return drainFrom(r, set, func(n int) { waitPublished(set, n) }, sent)
}

// backlogOfOutage builds a sink behind a closed relay and publishes on
// the bus at a steady rate for the outage, returning once every message
// is on disk.
func (b *benchmark) backlogOfOutage(url, kind string) (*relay, *north.Set, int) {
	r, bb, set := b.relayed(url, kind)
	const tick = 10 * time.Millisecond
	perTick := float64(b.rate) * tick.Seconds()
	sent, owed := 0, 0.0
	t := time.NewTicker(tick)
	for end := time.Now().Add(b.outage); time.Now().Before(end); <-t.C {
		for owed += perTick; owed >= 1; owed-- {
			check(bb.Publish(b.topic(sent), b.payload, "bench"))
			sent++
		}
	}
	t.Stop()
	waitQueued(set, sent)
	return r, set, sent
}

func waitQueued(set *north.Set, n int) {
	for deadline := time.Now().Add(5 * time.Minute); set.Stats()[0].QueueRecords < int64(n); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("only %d of %d messages in the store", set.Stats()[0].QueueRecords, n))
		}
	}
}

func waitUp(set *north.Set) {
	for deadline := time.Now().Add(30 * time.Second); !set.Stats()[0].LinkUp; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			panic("sink never connected")
		}
	}
}
