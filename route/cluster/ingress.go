package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgemux/edgemux/route/bus"
)

// The way in: messages of the bucket's subjects, from the start-up load
// and then live, become local publishes with a "cluster:<origin>" source,
// and other gateways' claimed-topic lists become claims on the local bus.

// onMessage is the live subscription's callback (one goroutine: order
// per subject holds). It waits for the start-up load, so a live message
// is never overwritten by an older loaded one.
func (l *Link) onMessage(m *nats.Msg) {
	select {
	case <-l.loaded:
	case <-l.done:
		return
	}
	l.handle(m.Subject, m.Header, m.Data, live)
}

// load reads the last value of every key of the bucket (an ordered
// consumer delivering the last message per subject) and handles each:
// at start (loading), up to MaxLoad values, the rest counted in
// NotLoaded; after a reconnect, to catch up with what was published
// while this gateway was cut off (what it has already is skipped by the
// per-topic order check).
func (l *Link) load(ctx context.Context, how arrival) error {
	// How many messages the stream holds (history 1: one per key) says
	// when to stop; a consumer's own count is known only once it runs.
	stream, err := l.js.Stream(ctx, "KV_"+l.opt.Bucket)
	if err != nil {
		return fmt.Errorf("cluster: read bucket %s: %w", l.opt.Bucket, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("cluster: read bucket %s: %w", l.opt.Bucket, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:   []string{"$KV." + l.opt.Bucket + ".>"},
		DeliverPolicy:    jetstream.DeliverLastPerSubjectPolicy,
		MaxResetAttempts: 3, // not the default, for ever: ctx bounds the read
	})
	if err != nil {
		return fmt.Errorf("cluster: read bucket %s: %w", l.opt.Bucket, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("cluster: read bucket %s: %w", l.opt.Bucket, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("cluster: read bucket %s: %w", l.opt.Bucket, err)
		}
		l.handle(msg.Subject(), msg.Headers(), msg.Data(), how)
		md, err := msg.Metadata()
		if err != nil || md.NumPending == 0 {
			break
		}
	}
	if how == atStart {
		l.log.Info("cluster values loaded", "loaded", l.loadN.Load(), "not_loaded", l.notLoad.Load())
	}
	return nil
}

// catchUp reloads the bucket each time the link comes back: what other
// gateways published while this one was cut off reached it in no live
// message. It runs on a goroutine of its own until Close. A failed read
// is tried again a second later until one succeeds: right after a NATS
// server restarts, the connection is back before JetStream serves the
// bucket, and no second reconnect would come to trigger another try.
func (l *Link) catchUp() {
	defer l.wg.Done()
	for {
		select {
		case <-l.done:
			return
		case <-l.relink:
		}
		for !l.catchUpOnce() {
			select {
			case <-l.done:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// catchUpOnce reads the bucket once; false if that failed.
func (l *Link) catchUpOnce() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 4*l.opt.ConnectTimeout)
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := l.load(ctx, atCatchUp); err != nil {
		l.log.Warn("cluster: catch-up after reconnect failed; trying again", "err", err)
		return false
	}
	l.catchUps.Add(1)
	return true
}

// arrival is how a message of the bucket came.
type arrival uint8

const (
	live      arrival = iota // on the live subscription
	atStart                  // read from the bucket at start
	atCatchUp                // read from the bucket after a reconnect
)

// handle takes one message of the bucket's subjects. One at a time: the
// live path and a catch-up share the order check and the claims.
func (l *Link) handle(subject string, h nats.Header, data []byte, how arrival) {
	if h.Get(kvOpHeader) != "" {
		return // a delete or purge of a key: nothing to publish
	}
	l.orderMu.Lock()
	defer l.orderMu.Unlock()
	switch {
	case strings.HasPrefix(subject, l.valSub):
		l.handleValue(subject[len(l.valSub):], h, data, how)
	case strings.HasPrefix(subject, l.clmSub):
		l.handleClaims(subject[len(l.clmSub):], data)
	}
}

func (l *Link) handleValue(tokens string, h nats.Header, data []byte, how arrival) {
	topic, err := Topic(tokens)
	origin := h.Get(hdrOrigin)
	if err != nil || origin == "" {
		l.invalid.Add(1)
		return
	}
	if origin == l.opt.GatewayID && how == atCatchUp {
		return // what this gateway sent: it has it
	}
	if origin == l.opt.GatewayID && how == live {
		// Never our own echo (NoEcho): another gateway uses our id.
		l.loopRejected.Add(1)
		if l.warnedDup.CompareAndSwap(false, true) {
			l.log.Error("cluster: a message with this gateway's own id arrived: another gateway uses it", "topic", topic)
		}
		return
	}
	if !l.spans(topic) {
		return
	}
	if l.claims[topic] {
		l.invalid.Add(1) // our device's value: only our poller says what it is
		return
	}
	if how == atStart && l.loadN.Load() >= uint64(l.opt.MaxLoad) {
		l.notLoad.Add(1)
		return
	}
	v := version{origin: origin}
	v.epoch, _ = strconv.ParseInt(h.Get(hdrEpoch), 10, 64)
	v.seq, _ = strconv.ParseUint(h.Get(hdrSeq), 10, 64)
	if last, ok := l.applied[topic]; ok && !v.after(last) {
		return // already had it, or a newer one (a catch-up racing the live path)
	}
	if err := l.bus.Publish(topic, data, SrcPrefix+origin); err != nil {
		l.dropped.Add(1)
		return
	}
	l.applied[topic] = v
	if how == atStart {
		l.loadN.Add(1)
	} else {
		l.received.Add(1)
	}
}

// version places a message in its origin's order on its topic: the
// origin link's start (epoch) and the origin bus's sequence number, which
// grows with every publish to the topic (bus.Message.Seq).
type version struct {
	origin string
	epoch  int64
	seq    uint64
}

// after reports whether v may follow last on one topic: any message of
// another origin may (gateways publishing one topic at once have no
// common order), one of the same origin only if it is newer.
func (v version) after(last version) bool {
	if v.origin != last.origin {
		return true
	}
	if v.epoch != last.epoch {
		return v.epoch > last.epoch
	}
	return v.seq > last.seq
}

// spans reports whether topic is one the cluster carries here.
func (l *Link) spans(topic string) bool {
	for _, f := range l.opt.Topics {
		if bus.Match(f, topic) {
			return true
		}
	}
	return false
}

// announceClaims publishes this gateway's claimed topics under its key
// (an empty list too: it replaces a former one).
func (l *Link) announceClaims(ctx context.Context) error {
	topics := make([]string, 0, len(l.claims))
	for t := range l.claims {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	if _, err := l.js.Publish(ctx, l.clmSub+l.opt.GatewayID, []byte(strings.Join(topics, "\n"))); err != nil {
		return fmt.Errorf("cluster: announce claimed topics: %w", err)
	}
	return nil
}

// remoteClaims are the other gateways' claimed topics, by origin. Only
// the ingress goroutine (or the load before it) touches them.
type remoteClaims struct {
	byOrigin map[string][]string
}

// handleClaims makes origin's announced topics claims on the local bus,
// owned by its "cluster:<origin>" source: its values are values, anyone
// else's publish is a write forwarded to origin (write.go).
func (l *Link) handleClaims(origin string, data []byte) {
	if origin == l.opt.GatewayID || !natsToken(origin) {
		return
	}
	var topics []string
	for t := range strings.SplitSeq(string(data), "\n") {
		if t != "" && l.spans(t) && !l.claims[t] {
			topics = append(topics, t)
		}
	}
	if slices.Equal(topics, l.remote.byOrigin[origin]) {
		return
	}
	if err := l.bus.Claim(SrcPrefix+origin, topics, remoteWriter{l: l, origin: origin}); err != nil {
		l.invalid.Add(1)
		l.log.Error("cluster: gateway's polled topics cannot be claimed here", "origin", origin, "err", err)
		return
	}
	l.remote.byOrigin[origin] = topics
}

func natsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !plainByte(c) && c != '_' {
			return false
		}
	}
	return true
}

// kvOpHeader marks a KV delete or purge (the KV package's own header).
const kvOpHeader = "KV-Operation"
