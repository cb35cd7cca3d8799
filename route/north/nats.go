package north

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS: bus topics become subjects level for token ("plant/a/temp" ->
// "plant.a.temp"), and back for commands. A topic NATS cannot carry (an
// empty level, or a level with ".", "*", ">" or white space) is refused:
// counted as dropped and logged, never altered into another subject. MQTT
// filters in commands become subject filters ("+" -> "*", "#" -> ">";
// "a/#" does not match "a" itself on NATS).

// ErrUnmappable is a topic NATS subjects cannot carry.
var ErrUnmappable = errors.New("north: topic not expressible as a NATS subject")

// subjectOf maps a topic to a subject: one pass, one allocation, as it
// is on every publish's path. (A cache of the mapped subjects, tried,
// measured no cheaper under load: its lookups missed the CPU cache.)
func subjectOf(topic string) (string, bool) {
	var b strings.Builder
	b.Grow(len(topic))
	start := 0
	for i := 0; i <= len(topic); i++ {
		if i == len(topic) || topic[i] == '/' {
			if i == start { // an empty level
				return "", false
			}
			if i < len(topic) {
				b.WriteByte('.')
			}
			start = i + 1
			continue
		}
		switch c := topic[i]; c {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// subjectFilter maps an MQTT filter to a subject filter.
func subjectFilter(filter string) (string, bool) {
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		switch l {
		case "+":
			levels[i] = "*"
		case "#":
			levels[i] = ">"
		default:
			if l == "" || strings.ContainsAny(l, ".*> \t\r\n") {
				return "", false
			}
		}
	}
	return strings.Join(levels, "."), true
}

// topicOf maps a subject back to a topic.
func topicOf(subject string) string { return strings.ReplaceAll(subject, ".", "/") }

// NATSOptions are a NATS uplink's settings.
type NATSOptions struct {
	URL      string // nats://host:4222 | tls://host:4222
	Name     string // the connection's name (client_id)
	Username string
	Password string
	TLS      *tls.Config // for tls:// URLs
	Stream   string      // "" = core NATS; else JetStream publishes with acks, into this stream (it must exist)
	State    string      // subject for online/offline ("" = none); NATS has no will
	Online   string
	Offline  string
	Log      *slog.Logger
}

// natsUplink is an Uplink over nats.go. nats.go reconnects by itself;
// its reconnect buffer is off, so nothing is sent behind the sink's back
// while the link is down (Publish refuses; the store keeps it).
type natsUplink struct {
	o       NATSOptions
	log     *slog.Logger
	nc      *nats.Conn
	js      jetstream.JetStream
	up      atomic.Bool
	onUp    func()
	onDown  func(error)
	subMu   sync.Mutex
	subs    []*nats.Subscription
	flushMu sync.Mutex
	next    *flushPending // the flush core QoS 1 publishes join now
	flushes chan struct{}
	stop    chan struct{}
	ready   chan struct{} // closed once Start has set nc and js: the handlers may fire before
	life    sync.Mutex    // orders wg.Add after a connect against Close's Wait
	closed  bool          // guarded by life
	wg      sync.WaitGroup
	once    sync.Once
}

// NewNATS returns a NATS uplink; Start connects it.
func NewNATS(o NATSOptions) Uplink {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &natsUplink{o: o, log: log, flushes: make(chan struct{}, 1), stop: make(chan struct{}), ready: make(chan struct{})}
}

func (u *natsUplink) Origin() string { return u.o.URL + " as " + u.o.Name }
func (u *natsUplink) Up() bool       { return u.up.Load() }

func (u *natsUplink) Start(onUp func(), onDown func(error)) {
	u.onUp, u.onDown = onUp, onDown
	opts := []nats.Option{nats.Name(u.o.Name), nats.MaxReconnects(-1), nats.ReconnectWait(200 * time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.ReconnectBufSize(-1), nats.Timeout(connectTimeout),
		nats.ConnectHandler(func(*nats.Conn) { u.connected() }),
		nats.ReconnectHandler(func(*nats.Conn) { u.connected() }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { u.lost(err) })}
	if u.o.Username != "" {
		opts = append(opts, nats.UserInfo(u.o.Username, u.o.Password))
	}
	if u.o.TLS != nil {
		opts = append(opts, nats.Secure(u.o.TLS))
	}
	nc, err := nats.Connect(u.o.URL, opts...)
	if err != nil { // only for bad options: RetryOnFailedConnect covers a server away
		u.log.Error("north: nats connect", "url", u.o.URL, "err", err)
		return
	}
	u.nc = nc
	if u.o.Stream != "" {
		u.js, _ = jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout), jetstream.WithPublishAsyncMaxPending(maxNorthInflightNATS))
	}
	u.wg.Add(1)
	go u.flusher()
	close(u.ready)
}

// maxNorthInflightNATS bounds JetStream publishes awaiting their ack.
const maxNorthInflightNATS = 65536

// connected runs on nats.go's goroutine: the link is up once the stream
// (JetStream) is there, checked off that goroutine.
func (u *natsUplink) connected() {
	u.life.Lock()
	defer u.life.Unlock()
	if u.closed {
		return
	}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		select {
		case <-u.ready:
		case <-u.stop:
			return
		}
		for u.js != nil && !u.streamThere() {
			select {
			case <-u.stop:
				return
			case <-time.After(time.Second):
			}
			if !u.nc.IsConnected() {
				return // the next (re)connect checks again
			}
		}
		u.announce(u.o.Online)
		u.up.Store(true)
		u.log.Info("north: connected", "url", u.o.URL, "name", u.o.Name)
		u.onUp()
	}()
}

func (u *natsUplink) streamThere() bool {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	_, err := u.js.Stream(ctx, u.o.Stream)
	if err != nil {
		u.log.Error("north: JetStream stream not usable (it must exist)", "stream", u.o.Stream, "err", err)
	}
	return err == nil
}

func (u *natsUplink) lost(err error) {
	if u.up.Swap(false) {
		u.log.Warn("north: connection lost", "url", u.o.URL, "err", err)
		u.onDown(err)
	}
}

// announce publishes the gateway's state on the state subject.
func (u *natsUplink) announce(state string) {
	if subj, ok := subjectOf(u.o.State); ok && u.o.State != "" {
		u.nc.Publish(subj, []byte(state))
		u.nc.FlushTimeout(stateTimeout)
	}
}

func (u *natsUplink) Publish(topic string, payload []byte, qos byte, _ bool) Pending {
	subj, ok := subjectOf(topic)
	if !ok {
		return settled{ErrUnmappable}
	}
	if !u.up.Load() {
		return settled{ErrLinkDown}
	}
	if u.js != nil {
		f, err := u.js.PublishAsync(subj, payload)
		if err != nil {
			return settled{err}
		}
		return newJSPending(f)
	}
	conn := u.nc.Stats().Reconnects // the connection this publish is written to, or a later one
	if err := u.nc.Publish(subj, payload); err != nil || qos == 0 {
		return settled{err}
	}
	// Published first, the flush joined after: a flush that began in
	// between covers this message too (its PING follows it), and the one
	// joined here comes later still; never a flush before the message.
	u.flushMu.Lock()
	p := u.next
	if p == nil {
		p = &flushPending{done: make(chan struct{}), conn: conn}
		u.next = p
	}
	u.flushMu.Unlock()
	if p.conn != conn { // a reconnect in between: this message may have gone down with the old connection
		return settled{ErrLinkDown}
	}
	select {
	case u.flushes <- struct{}{}:
	default:
	}
	return p
}

// flushPending is every core publish at QoS 1 written before one flush
// (a PING answered by the server's PONG: the server read all of them):
// done when that flush returns. Core NATS has no acknowledgement beyond
// that: a subscriber that is away misses it.
type flushPending struct {
	done chan struct{}
	err  error
	conn uint64 // nats.go's reconnect count when its publishes were written
}

func (p *flushPending) Done() <-chan struct{} { return p.done }
func (p *flushPending) Error() error          { return p.err }

// flusher settles core QoS 1 publishes: it takes the flush they joined
// (publishes after that join the next one) and flushes. The publisher
// does not wait for it: while one flush is out, the next fills.
func (u *natsUplink) flusher() {
	defer u.wg.Done()
	for {
		select {
		case <-u.stop:
			return
		case <-u.flushes:
		}
		u.flushMu.Lock()
		p := u.next
		u.next = nil
		u.flushMu.Unlock()
		if p == nil {
			continue
		}
		p.err = u.nc.FlushTimeout(ackTimeout)
		if p.err == nil && u.nc.Stats().Reconnects != p.conn {
			// The PONG came on a later connection than the one the
			// publishes went out on: they may be lost with it.
			p.err = ErrLinkDown
		}
		close(p.done)
	}
}

// jsPending is a JetStream publish awaiting its PubAck. It starts no
// goroutine of its own: the window polls it (poll), and only a wait on
// Done (the oldest in flight, not yet acked) starts one to turn nats.go's
// two channels (ack, error) into one.
type jsPending struct {
	f    jetstream.PubAckFuture
	mu   sync.Mutex
	over bool // the outcome is in err
	err  error
	done chan struct{} // made by the first Done
}

func newJSPending(f jetstream.PubAckFuture) *jsPending { return &jsPending{f: f} }

// poll reports whether the PubAck (or the error) came, without waiting.
func (p *jsPending) poll() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.over && p.done == nil { // once Done's goroutine reads the channels, only it does
		select {
		case <-p.f.Ok():
			p.over = true
		case p.err = <-p.f.Err():
			p.over = true
		default:
		}
	}
	return p.over
}

func (p *jsPending) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		p.done = make(chan struct{})
		if p.over {
			close(p.done)
		} else {
			go p.wait()
		}
	}
	return p.done
}

func (p *jsPending) wait() {
	var err error
	select {
	case <-p.f.Ok():
	case err = <-p.f.Err():
	}
	p.mu.Lock()
	p.over, p.err = true, err
	p.mu.Unlock()
	close(p.done)
}

func (p *jsPending) Error() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (u *natsUplink) Subscribe(filters []string, handler func(topic string, payload []byte)) error {
	u.subMu.Lock()
	defer u.subMu.Unlock()
	if len(u.subs) > 0 {
		return nil // nats.go keeps subscriptions across reconnects
	}
	for _, f := range filters {
		subj, ok := subjectFilter(f)
		if !ok {
			return ErrUnmappable
		}
		s, err := u.nc.Subscribe(subj, func(m *nats.Msg) { handler(topicOf(m.Subject), m.Data) })
		if err != nil {
			return err
		}
		u.subs = append(u.subs, s)
	}
	return u.nc.FlushTimeout(stateTimeout)
}

func (u *natsUplink) Close() {
	u.once.Do(func() {
		if u.nc == nil {
			return
		}
		if u.up.Load() {
			u.announce(u.o.Offline)
		}
		u.life.Lock()
		u.closed = true
		close(u.stop)
		u.life.Unlock()
		u.nc.Close()
		u.wg.Wait()
	})
}
