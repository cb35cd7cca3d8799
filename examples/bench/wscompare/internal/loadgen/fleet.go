package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Topics of the run: every subscriber holds Filter, which matches both.
const (
	Filter      = "bench/#"
	TopicReady  = "bench/ready" // probe publishes that prove a subscription live
	TopicFanout = "bench/fan"   // the measured publishes
)

// Kind is what a pushed message is, to the counters.
type Kind uint8

// Kinds of pushed message.
const (
	KindOther Kind = iota // anything else: an error reply, a foreign topic
	KindReady
	KindFanout
)

var (
	quotedReady  = []byte(`"` + TopicReady + `"`)
	quotedFanout = []byte(`"` + TopicFanout + `"`)
)

// Classify tells a probe from a measured delivery by the quoted topic in
// the push, without decoding the JSON: the client must stay cheap, since
// it shares two cores with the server it measures. It does not allocate.
func Classify(msg []byte) Kind {
	switch {
	case bytes.Contains(msg, quotedFanout):
		return KindFanout
	case bytes.Contains(msg, quotedReady):
		return KindReady
	default:
		return KindOther
	}
}

type sub struct {
	conn  *websocket.Conn
	ready atomic.Bool
}

// fleet is the subscribers and the one publisher of a run.
type fleet struct {
	subs       []*sub
	pub        *websocket.Conn
	base       time.Time    // monotonic origin of lastNanos
	lastNanos  atomic.Int64 // latest delivery, since base
	ready      atomic.Int64
	delivered  atomic.Int64
	other      atomic.Int64
	mismatched atomic.Int64 // connections whose server chose another subprotocol
	readers    sync.WaitGroup
	progress   func(format string, args ...any)
}

// open dials cfg.Conns subscribers and the publisher, subscribes each, and
// waits until every subscription is proven live. The fleet returned, even
// with an error, holds what it opened and must be closed.
func open(ctx context.Context, cfg Config) (*fleet, error) {
	f := &fleet{base: time.Now(), progress: func(format string, args ...any) {
		fmt.Fprintf(cfg.Progress, cfg.Server+": "+format+"\n", args...)
	}}
	pub, err := dial(ctx, cfg, dialer(cfg, nil))
	if err != nil {
		return f, err
	}
	f.pub = pub
	f.readers.Add(1)
	go f.read(pub, nil)
	if err := f.dialAll(ctx, cfg); err != nil {
		return f, err
	}
	f.progress("%d connections open, subscribing proven by probes on %s", len(f.subs), TopicReady)
	return f, f.awaitReady(ctx, cfg)
}

func dialer(cfg Config, src net.IP) *websocket.Dialer {
	nd := &net.Dialer{Timeout: cfg.DialTimeout}
	if src != nil {
		nd.LocalAddr = &net.TCPAddr{IP: src}
	}
	return &websocket.Dialer{
		NetDialContext:   nd.DialContext,
		HandshakeTimeout: cfg.DialTimeout,
		Subprotocols:     []string{cfg.Subprotocol},
		ReadBufferSize:   512, // the client's memory is not measured, but 10k of them add up
		WriteBufferSize:  512,
	}
}

func dial(ctx context.Context, cfg Config, d *websocket.Dialer) (*websocket.Conn, error) {
	var lastErr error
	for attempt := range 3 {
		if attempt > 0 && !sleepCtx(ctx, time.Duration(attempt)*200*time.Millisecond) {
			return nil, ctx.Err()
		}
		conn, resp, err := d.DialContext(ctx, cfg.URL, nil)
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("%w: %w", ErrDial, lastErr)
}

// dialAll opens the subscribers, cfg.Parallel at a time.
func (f *fleet) dialAll(ctx context.Context, cfg Config) error {
	dialers := map[string]*websocket.Dialer{}
	subs := make([]*sub, cfg.Conns)
	errc := make(chan error, cfg.Conns)
	slots := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	for i := range cfg.Conns {
		src, err := SourceAddr(cfg.FirstSource, i, cfg.PerSource)
		if err != nil {
			return err
		}
		d := dialers[src.String()]
		if d == nil {
			d = dialer(cfg, src)
			dialers[src.String()] = d
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			f.keep(subs)
			return ctx.Err()
		case err := <-errc:
			wg.Wait()
			f.keep(subs)
			return err
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			s, err := f.subscribe(ctx, cfg, d)
			if err != nil {
				errc <- fmt.Errorf("connection %d from %s: %w", i, src, err)
				return
			}
			subs[i] = s
		}()
		if (i+1)%2000 == 0 {
			f.progress("%d dialled", i+1)
		}
	}
	wg.Wait()
	f.keep(subs)
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// keep records the subscribers that did open, so close finds them.
func (f *fleet) keep(subs []*sub) {
	for _, s := range subs {
		if s != nil {
			f.subs = append(f.subs, s)
		}
	}
}

func (f *fleet) subscribe(ctx context.Context, cfg Config, d *websocket.Dialer) (*sub, error) {
	conn, err := dial(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	if conn.Subprotocol() != cfg.Subprotocol {
		f.mismatched.Add(1)
	}
	conn.SetWriteDeadline(time.Now().Add(cfg.DialTimeout))
	msg := []byte(`{"op":"sub","topic":"` + Filter + `"}`)
	if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
		conn.Close()
		return nil, fmt.Errorf("loadgen: subscribe: %w", err)
	}
	s := &sub{conn: conn}
	f.readers.Add(1)
	go f.read(conn, s)
	return s, nil
}

// read counts what conn is pushed until it fails; gorilla answers pings
// and closes only while someone reads. s is nil for the publisher. It reads
// each message into a buffer on its own stack rather than allocating one
// per message (ReadMessage would): 2M deliveries of garbage would make the
// client, which shares the cores with the server, the bottleneck sooner.
func (f *fleet) read(conn *websocket.Conn, s *sub) {
	defer f.readers.Done()
	var buf [256]byte
	for {
		_, r, err := conn.NextReader()
		if err != nil {
			return
		}
		n, err := readPrefix(r, buf[:])
		if err != nil {
			return
		}
		if s == nil {
			f.other.Add(1)
			continue
		}
		switch Classify(buf[:n]) {
		case KindFanout:
			f.delivered.Add(1)
			f.markLast()
		case KindReady:
			if !s.ready.Swap(true) {
				f.ready.Add(1)
			}
		default:
			f.other.Add(1)
		}
	}
}

// readPrefix reads a whole message from r, keeping its first len(buf)
// bytes (where the topic is) and discarding the rest.
func readPrefix(r io.Reader, buf []byte) (int, error) {
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return n, nil
	case err != nil:
		return n, err
	}
	_, err = io.Copy(io.Discard, r)
	return n, err
}

// markLast moves lastNanos forward to now, never back.
func (f *fleet) markLast() {
	now := int64(time.Since(f.base))
	for {
		last := f.lastNanos.Load()
		if now <= last || f.lastNanos.CompareAndSwap(last, now) {
			return
		}
	}
}

func (f *fleet) publish(topic string, data int) error {
	f.pub.SetWriteDeadline(time.Now().Add(30 * time.Second))
	msg := `{"op":"pub","topic":"` + topic + `","data":` + strconv.Itoa(data) + `}`
	if err := f.pub.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		return fmt.Errorf("loadgen: publish: %w", err)
	}
	return nil
}

// awaitReady publishes probes until every subscriber has seen one.
func (f *fleet) awaitReady(ctx context.Context, cfg Config) error {
	deadline := time.Now().Add(cfg.ReadyWithin)
	want := int64(len(f.subs))
	for probe := 0; ; probe++ {
		if err := f.publish(TopicReady, probe); err != nil {
			return err
		}
		// Give the probe time to reach everyone before sending another.
		for range 20 {
			if f.ready.Load() == want {
				f.progress("all %d subscriptions live after %d probes", want, probe+1)
				return nil
			}
			if !sleepCtx(ctx, 50*time.Millisecond) {
				return ctx.Err()
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d of %d within %s", ErrNotReady, f.ready.Load(), want, cfg.ReadyWithin)
		}
	}
}

type fanoutResult struct {
	expected, delivered int64
	seconds             float64
	err                 error
}

// fanout publishes cfg.Publishes messages back to back and waits until
// every subscriber has them all, or deliveries stop for cfg.Quiet, or
// cfg.FanoutLimit passes.
func (f *fleet) fanout(ctx context.Context, cfg Config) fanoutResult {
	res := fanoutResult{expected: int64(len(f.subs)) * int64(cfg.Publishes)}
	before := f.delivered.Load()
	start := int64(time.Since(f.base))
	f.lastNanos.Store(start)
	f.progress("fan-out: %d publishes to %d subscribers", cfg.Publishes, len(f.subs))
	for i := range cfg.Publishes {
		if res.err = f.publish(TopicFanout, i); res.err != nil {
			break
		}
	}
	res.err = f.awaitDeliveries(ctx, cfg, before, res.expected, res.err)
	res.delivered = f.delivered.Load() - before
	res.seconds = float64(f.lastNanos.Load()-start) / 1e9
	f.progress("fan-out: %d of %d delivered in %.2fs", res.delivered, res.expected, res.seconds)
	return res
}

func (f *fleet) awaitDeliveries(ctx context.Context, cfg Config, before, expected int64, err error) error {
	limit := time.Now().Add(cfg.FanoutLimit)
	seen, lastProgress, lastReport := int64(-1), time.Now(), time.Now()
	for {
		got := f.delivered.Load() - before
		if time.Since(lastReport) >= 5*time.Second {
			f.progress("fan-out: %d of %d delivered so far", got, expected)
			lastReport = time.Now()
		}
		switch {
		case got >= expected:
			return err
		case got != seen:
			seen, lastProgress = got, time.Now()
		case time.Since(lastProgress) > cfg.Quiet:
			return fmt.Errorf("fan-out stalled at %d of %d (no delivery for %s)", got, expected, cfg.Quiet)
		}
		if time.Now().After(limit) {
			return fmt.Errorf("fan-out cut at %s: %d of %d", cfg.FanoutLimit, got, expected)
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// close closes every connection and waits (boundedly) for the readers.
func (f *fleet) close() {
	if f.pub != nil {
		f.pub.Close()
	}
	for _, s := range f.subs {
		s.conn.Close()
	}
	done := make(chan struct{})
	go func() { f.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
}

// notes says what a reader of the result should know about the fleet.
func (f *fleet) notes() []string {
	var out []string
	if n := f.mismatched.Load(); n > 0 {
		out = append(out, fmt.Sprintf("%d connections got another subprotocol", n))
	}
	if n := f.other.Load(); n > 0 {
		out = append(out, fmt.Sprintf("%d unexpected messages (errors or foreign topics)", n))
	}
	return out
}
