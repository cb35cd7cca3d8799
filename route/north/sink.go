package north

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
)

// drainBytes bounds what one Drain of the bus takes; ackTimeout is how
// long a publish may wait for its acknowledgement before it counts as
// failed (and, with a store, is sent again).
const (
	drainBytes = 256 << 10
	ackTimeout = 15 * time.Second
)

// Sink is one uplink fed by the bus. Its goroutine drains the bus
// subscriber, maps each message and either publishes it (no store) or
// appends it to the store, which a second goroutine drains to the uplink.
type Sink struct {
	name    string
	src     string // bus src of its commands: "<kind>:<name>"
	gateway string
	cfg     config.NorthSink
	bus     *bus.Bus
	up      Uplink
	store   Store // nil: no store-and-forward
	log     *slog.Logger

	maps   []mapping
	cmds   []command
	change *changeTable // the forward goroutine's
	sub    *bus.Subscriber
	wake   chan struct{}

	linkMu   sync.Mutex
	linkDown chan struct{} // closed when the link goes down; a new one on each up
	linkUp   chan struct{} // signalled on each up
	upSince  atomic.Int64  // unix ns of the last connect: store records older than this are backlog
	cmdsUp   atomic.Bool   // the commands' subscription is in place on this connection

	// live holds the store records the forward goroutine published as
	// they came (the link up): the drain goroutine takes their outcome
	// instead of sending them again. liveMu is held across the Append and
	// the push, so a record the drainer peeks is either here or was not
	// published live.
	liveMu sync.Mutex
	live   liveQueue
	// Order while the link is up: once a record could not go live (the
	// live table full), none may until the drainer has sent past it.
	liveCap  int           // liveCapFor; tests make it small
	fly      int           // the drainer's least bound on records in flight: minFlying; tests make it small
	skipped  uint64        // guarded by liveMu: the newest record that skipped the live lane
	sentUpTo atomic.Uint64 // the newest record the drainer has sent or taken
	appended chan struct{} // signalled on each Append: the drainer's window may have room
	liveRoom chan struct{} // signalled when the drainer takes live records: the live queue has room

	// The forward goroutine's (at Close, flushToStore's): one bus batch's
	// messages for the store, appended together by spoolPending.
	pend  []outbound
	recs  [][]byte
	arena []byte // the encoded records, one after another

	c       counters
	stop    chan struct{}
	wg      sync.WaitGroup
	stopped sync.Once
}

// counters are a sink's totals since start (Stats reads them).
type counters struct {
	published, failed, spooled, drained, dropped, refused, suppressed atomic.Uint64
	cmdWritten, cmdRefused, cmdFailed                                 atomic.Uint64
}

// NewSink builds a sink on bus b over up, with store or nil; Start starts
// it. cfg is validated and normalized.
func NewSink(cfg config.NorthSink, gateway string, b *bus.Bus, up Uplink, store Store, log *slog.Logger) (*Sink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{name: cfg.Name, src: cfg.Kind + ":" + cfg.Name, gateway: gateway, cfg: cfg, bus: b, up: up, store: store,
		log: log.With("sink", cfg.Name), change: newChangeTable(cfg.ChangeTable),
		liveCap: liveCapFor(cfg), fly: minFlying, wake: make(chan struct{}, 1), appended: make(chan struct{}, 1), liveRoom: make(chan struct{}, 1), linkDown: make(chan struct{}), linkUp: make(chan struct{}, 1), stop: make(chan struct{})}
	close(s.linkDown) // down until the first connect
	for _, m := range cfg.Map {
		s.maps = append(s.maps, mapping{from: m.From, to: compileTemplate(m.To), qos: byte(m.QoS), retain: m.Retain, onChange: m.On == "change"})
	}
	for _, c := range cfg.Commands {
		s.cmds = append(s.cmds, command{from: c.From, to: compileTemplate(c.To)})
	}
	sub, err := b.NewSubscriber(s.signal)
	if err != nil {
		return nil, err
	}
	for _, m := range s.maps {
		if err := sub.SubscribeLive(m.from); err != nil {
			sub.Close()
			return nil, err
		}
	}
	s.sub = sub
	return s, nil
}

// Name is the sink's configured name.
func (s *Sink) Name() string { return s.name }

func (s *Sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start connects the uplink and starts the sink's goroutines.
func (s *Sink) Start() {
	s.wg.Add(1)
	go s.forward()
	if s.store != nil {
		s.wg.Add(1)
		go s.drain()
	}
	s.up.Start(s.onUp, s.onDown)
}

// Close stops the sink: the uplink announces the gateway offline and
// disconnects, the goroutines end, the store is closed (synced).
func (s *Sink) Close() error {
	var err error
	s.stopped.Do(func() {
		close(s.stop)
		s.up.Close()
		s.wg.Wait()
		s.flushToStore(nil) // the forward goroutine is gone: this one owns the subscriber
		s.sub.Close()
		if s.store != nil {
			err = s.store.Close()
		}
	})
	return err
}

func (s *Sink) onUp() {
	s.linkMu.Lock()
	s.linkDown = make(chan struct{})
	s.linkMu.Unlock()
	s.upSince.Store(time.Now().UnixNano())
	if len(s.cmds) > 0 {
		filters := make([]string, len(s.cmds))
		for i, c := range s.cmds {
			filters[i] = c.from
		}
		if err := s.up.Subscribe(filters, s.command); err != nil {
			s.log.Warn("north: subscribing to commands failed", "err", err)
		} else {
			s.cmdsUp.Store(true)
		}
	}
	select {
	case s.linkUp <- struct{}{}:
	default:
	}
}

func (s *Sink) onDown(error) {
	s.cmdsUp.Store(false)
	s.linkMu.Lock()
	select {
	case <-s.linkDown:
	default:
		close(s.linkDown)
	}
	s.linkMu.Unlock()
}

// down is closed once the current connection is gone.
func (s *Sink) down() <-chan struct{} {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	return s.linkDown
}

// outbound is one message as it goes to the broker.
type outbound struct {
	topic   string
	payload []byte
	qos     byte
	retain  bool
}

// forward drains the bus subscriber until Close.
func (s *Sink) forward() {
	defer s.wg.Done()
	var buf []bus.Message
	var inflight window // no store: publishes awaiting their ack
	for {
		for inflight.done() {
			s.settle(&inflight, false)
		}
		var head <-chan struct{}
		if inflight.len() > 0 {
			head = inflight.oldest().p.Done()
		}
		select {
		case <-s.stop:
			return
		case <-head:
			s.settle(&inflight, false)
			continue
		case <-s.wake:
		}
		batch := s.sub.Drain(buf[:0], drainBytes)
		s.c.dropped.Add(batch.Dropped) // the bus queue overflowed: the sink fell behind
		for i := range batch.Msgs {
			s.route(&batch.Msgs[i], &inflight)
		}
		s.spoolPending()
		clear(batch.Msgs)
		buf = batch.Msgs
		if batch.More {
			s.signal()
		}
	}
}

// flushToStore, at Close, moves what the bus still holds for the sink
// into its store, so a clean stop loses nothing queued (it goes at the
// next start). Without a store there is nowhere to keep it.
func (s *Sink) flushToStore(buf []bus.Message) {
	if s.store == nil {
		return
	}
	for {
		batch := s.sub.Drain(buf[:0], drainBytes)
		s.c.dropped.Add(batch.Dropped)
		for i := range batch.Msgs {
			s.route(&batch.Msgs[i], nil)
		}
		s.spoolPending()
		if !batch.More {
			return
		}
		clear(batch.Msgs)
		buf = batch.Msgs
	}
}

// route maps m through every matching map and sends the result, or with
// a store gathers it for spoolPending (inflight is nil with a store).
func (s *Sink) route(m *bus.Message, inflight *window) {
	if m.Src == s.src {
		return // came in through this sink's commands: no echo
	}
	for i := range s.maps {
		mp := &s.maps[i]
		if !bus.Match(mp.from, m.Topic) {
			continue
		}
		out := outbound{topic: mp.to.render(mp.from, m.Topic, s.gateway), payload: m.Payload, qos: mp.qos, retain: mp.retain}
		if s.cfg.Payload == PayloadEnvelope {
			out.payload = envelope(m.Payload, m.Src, m.TS/int64(time.Millisecond))
		}
		if mp.onChange && !s.change.changed(out.topic, out.payload) {
			s.c.suppressed.Add(1)
			continue
		}
		if s.store != nil {
			s.pend = append(s.pend, out)
			continue
		}
		for inflight.len() >= s.cfg.Inflight {
			s.settle(inflight, true)
		}
		inflight.add(s.up.Publish(out.topic, out.payload, out.qos, out.retain), 0, false)
	}
}

// settle counts the outcome of the oldest slot in flight (waiting for it
// when wait) and drops it from the window. Without a store a failed
// publish is lost: failed and dropped both count it.
func (s *Sink) settle(inflight *window, wait bool) {
	sl := inflight.oldest()
	var err error
	if wait {
		err = waitPending(sl.p, ackTimeout, s.stop, s.down())
	} else {
		err = sl.p.Error()
	}
	n := uint64(sl.n)
	switch {
	case err == nil:
		s.c.published.Add(n)
	case errors.Is(err, ErrUnmappable):
		s.c.dropped.Add(n)
	default:
		s.c.failed.Add(n)
		s.c.dropped.Add(n)
	}
	inflight.pop()
}

// liveCapFor bounds the records a sink publishes live and the drainer
// has not yet confirmed (an entry of 24 bytes each); past it live
// messages wait for the drainer like a backlog. MQTT: 16,384, as QoS 1
// ids are 16 bits, shared with the drainer's batches. JetStream: 32,768,
// beside the drainer's window of up to 16,384 under nats.go's bound of
// 65,536 publishes awaiting an ack. Core NATS: 65,536; its confirmations
// are flushes, whose round trip under load (a PING queued behind the
// megabytes before it) is what the live queue must cover.
func liveCapFor(cfg config.NorthSink) int {
	switch {
	case cfg.Kind != "nats":
		return 16384
	case cfg.JetStream.Stream != "":
		return 32768
	}
	return 65536
}

// liveWait bounds how long the forward goroutine waits for room in the
// live queue (the drainer behind in taking outcomes: not scheduled on a
// busy machine, say) before its records skip the live lane. A skip sends
// every later record through the store until the drainer has caught up
// with the bus, each read back and published by the drainer, which under
// a steady load it may never do: a short wait is the cheaper path. The
// bus queue holds what comes meanwhile.
const liveWait = 100 * time.Millisecond

// waitLiveRoom waits, while the link is up and the live lane open, until
// the live queue has room for n more records, at most liveWait.
func (s *Sink) waitLiveRoom(n int) {
	n = min(n, s.liveCap)
	var t *time.Timer
	for {
		s.liveMu.Lock()
		room := s.live.len()+n <= s.liveCap || s.sentUpTo.Load() < s.skipped
		s.liveMu.Unlock()
		if room || !s.up.Up() {
			return
		}
		if t == nil {
			t = time.NewTimer(liveWait)
			defer t.Stop()
		}
		select {
		case <-s.liveRoom:
		case <-t.C:
			return
		case <-s.stop:
			return
		case <-s.down():
			return
		}
	}
}

// spoolPending appends the messages route gathered to the store, in one
// AppendBatch (one write), and while the link is up publishes each at
// once (live data never waits behind a backlog); the drainer confirms it
// and removes it from the store once the broker took it. At its cap the
// store drops the oldest (counted by the store) or refuses a message
// (counted here; the batch goes on after it).
func (s *Sink) spoolPending() {
	if len(s.pend) == 0 {
		return
	}
	s.arena, s.recs = s.arena[:0], s.recs[:0]
	ends := make([]int, 0, 64)
	for _, out := range s.pend {
		s.arena = appendRecord(s.arena, out)
		ends = append(ends, len(s.arena))
	}
	start := 0
	for _, end := range ends {
		s.recs = append(s.recs, s.arena[start:end:end])
		start = end
	}
	pend, recs, spooled := s.pend, s.recs, 0
	s.waitLiveRoom(len(pend))
	s.liveMu.Lock()
	for len(recs) > 0 {
		first, n, err := s.store.AppendBatch(recs)
		s.publishLive(first, pend[:n])
		spooled += n
		if err == nil {
			break
		}
		if errors.Is(err, ErrStoreFull) {
			s.c.refused.Add(1)
		} else {
			s.c.dropped.Add(1)
			s.log.Warn("north: store append failed; message dropped", "topic", pend[n].topic, "err", err)
		}
		pend, recs = pend[n+1:], recs[n+1:]
	}
	s.liveMu.Unlock()
	clear(s.pend)
	s.pend = s.pend[:0]
	if spooled > 0 {
		s.c.spooled.Add(uint64(spooled))
		select {
		case s.appended <- struct{}{}:
		default:
		}
	}
}

// publishLive publishes the records first.. (outs) as they were stored,
// while the link is up; the caller holds liveMu.
func (s *Sink) publishLive(first uint64, outs []outbound) {
	if len(outs) == 0 || !s.up.Up() {
		return
	}
	for i, out := range outs {
		seq := first + uint64(i)
		if s.live.len() < s.liveCap && s.sentUpTo.Load() >= s.skipped {
			s.live.push(seq, s.up.Publish(out.topic, out.payload, out.qos, out.retain))
		} else {
			s.skipped = seq
		}
	}
}
