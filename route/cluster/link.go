package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgemux/edgemux/route/bus"
)

// Errors Start returns.
var (
	ErrDuplicateID = errors.New("cluster: another live gateway has this gateway id")
	ErrOptions     = errors.New("cluster: invalid options")
)

// SrcPrefix starts the bus source of every message received from the
// cluster: "cluster:<origin gateway id>".
const SrcPrefix = "cluster:"

// Header names of a mirrored message.
const (
	hdrOrigin = "Edgemux-Origin"
	hdrSrc    = "Edgemux-Src"
	hdrTS     = "Edgemux-Ts"
	hdrEpoch  = "Edgemux-Epoch" // the origin link's start, unix ns: a restarted origin's sequence starts again
	hdrSeq    = "Edgemux-Seq"   // the origin bus's publish sequence
)

// Options configure a Link. Zero limits take the defaults below.
type Options struct {
	URLs      []string // NATS servers
	GatewayID string   // this gateway's id; "" = the hostname
	Topics    []string // bus filters the cluster spans; nil = ["#"]
	Bucket    string   // KV bucket of the last values
	Prefix    string   // control subjects' prefix
	Memory    bool     // create the bucket in memory, not on file
	Replicas  int      // the bucket's replicas when it is created

	CAFile, CertFile, KeyFile string // TLS
	CredsFile                 string
	User, PasswordFile        string

	MaxPayload int // bytes per mirrored message
	MaxPending int // queued towards NATS / remembered while down / received not yet published
	MaxLoad    int // last values loaded at start; <= 0: 100000

	// Claims are the topics this gateway's poller owns (bus.Claim), to
	// announce; a remote message on one of them is never a value here.
	Claims []string
	// ConnectTimeout bounds the first connection and the start-up reads.
	ConnectTimeout time.Duration
	Logger         *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.GatewayID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return o, fmt.Errorf("%w: no gateway id and no hostname: %v", ErrOptions, err)
		}
		o.GatewayID = sanitizeID(h)
	}
	if len(o.Topics) == 0 {
		o.Topics = []string{"#"}
	}
	for _, f := range o.Topics {
		if err := bus.ValidFilter(f); err != nil {
			return o, fmt.Errorf("%w: topics: %v", ErrOptions, err)
		}
	}
	if len(o.URLs) == 0 || o.Bucket == "" || o.Prefix == "" {
		return o, fmt.Errorf("%w: urls, bucket and prefix are needed", ErrOptions)
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = 65536
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 65536
	}
	if o.MaxLoad <= 0 {
		o.MaxLoad = 100000
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// sanitizeID makes a hostname a gateway id: what a subject token takes.
func sanitizeID(h string) string {
	h, _, _ = strings.Cut(h, ".")
	var b strings.Builder
	for i := 0; i < len(h) && b.Len() < 64; i++ {
		if c := h[i]; plainByte(c) || c == '_' {
			b.WriteByte(c)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Stats are a Link's counters since Start.
type Stats struct {
	Sent         uint64 `json:"sent"`                  // messages published to NATS (re-sends included)
	Received     uint64 `json:"received"`              // messages from other gateways published into the local bus
	Dropped      uint64 `json:"dropped"`               // messages lost: mirror queue drops, too long, failed publishes, slow-consumer drops, refused by the local bus
	LoopRejected uint64 `json:"loop_rejected"`         // messages that arrived with this gateway's own origin
	Unsent       uint64 `json:"unsent"`                // local messages not mirrored while the link was down (their topics' last values are re-sent)
	Resent       uint64 `json:"resent"`                // last values re-sent after the link came back
	Invalid      uint64 `json:"invalid"`               // messages from NATS without an origin, with a bad subject, or on a topic this gateway polls
	Loaded       uint64 `json:"kv_loaded"`             // last values loaded from the bucket at start
	NotLoaded    uint64 `json:"kv_not_loaded"`         // last values past max_load, not loaded
	Reconnects   uint64 `json:"reconnects"`            // times the link came back
	Forwarded    uint64 `json:"writes_forwarded"`      // writes to topics another gateway polls, sent to it
	ForwardFail  uint64 `json:"writes_forward_failed"` // of those, refused there, failed at the device, or unanswered
	Served       uint64 `json:"writes_served"`         // writes other gateways sent to this one's devices
	CatchUps     uint64 `json:"catch_ups"`             // bucket reads done after the link came back
	LinkUp       bool   `json:"link_up"`
	GatewayID    string `json:"gateway_id"`
}

// Link is one gateway's membership in the cluster.
type Link struct {
	opt    Options
	bus    *bus.Bus
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	valSub string // "$KV.<bucket>.v."
	clmSub string // "$KV.<bucket>.c."
	claims map[string]bool
	remote remoteClaims

	ingress *nats.Subscription
	probe   *nats.Subscription
	loaded  chan struct{}          // closed when the start-up load is done: live messages wait for it
	done    chan struct{}          // closed by Close
	mirror  atomic.Pointer[mirror] // set once start has loaded the bucket; NATS callbacks read it

	stopOnce sync.Once
	wg       sync.WaitGroup

	sent, received, dropped, loopRejected   atomic.Uint64
	unsent, resent, invalid, loadN, notLoad atomic.Uint64
	reconnects, catchUps                    atomic.Uint64
	forwarded, forwardFailed, served        atomic.Uint64 // writes to other gateways' devices, and for them (write.go)
	forwarding                              atomic.Int64  // forwarded writes waiting for their answer
	writeSub                                *nats.Subscription
	warnedDup                               atomic.Bool
	relink                                  chan struct{} // the link came back: catch up
	epoch                                   string        // this link's start, unix ns (hdrEpoch)

	orderMu sync.Mutex         // one message applied at a time: live path and catch-up
	applied map[string]version // topic -> the last message applied from the cluster
}

// Start joins the cluster: it connects, makes sure no live gateway has
// this id, opens (or creates) the bucket, subscribes, loads the last
// values into the local bus, announces this gateway's claimed topics and
// starts mirroring. It returns once all that is done; an error leaves
// nothing running. A NATS server that cannot be reached within
// ConnectTimeout fails the start.
func Start(b *bus.Bus, o Options) (*Link, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Link{
		opt: o, bus: b, log: o.Logger.With("gateway_id", o.GatewayID),
		valSub: "$KV." + o.Bucket + ".v.", clmSub: "$KV." + o.Bucket + ".c.",
		claims: map[string]bool{}, loaded: make(chan struct{}), done: make(chan struct{}),
		applied: map[string]version{}, relink: make(chan struct{}, 1), epoch: strconv.FormatInt(time.Now().UnixNano(), 10),
	}
	l.remote.byOrigin = map[string][]string{}
	for _, t := range o.Claims {
		l.claims[t] = true
	}
	if err := l.start(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Link) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.opt.ConnectTimeout)
	defer cancel()
	if err := l.connect(); err != nil {
		return err
	}
	if err := l.claimID(); err != nil {
		return err
	}
	if err := l.openBucket(ctx); err != nil {
		return err
	}
	sub, err := l.nc.Subscribe("$KV."+l.opt.Bucket+".>", l.onMessage)
	if err != nil {
		return fmt.Errorf("cluster: subscribe: %w", err)
	}
	l.ingress = sub
	// A message past these waits in no queue: it is dropped and counted
	// (slow consumer), never piling up in memory.
	if err := sub.SetPendingLimits(l.opt.MaxPending, l.opt.MaxPending*min(l.opt.MaxPayload+256, 1<<20)); err != nil {
		return err
	}
	if err := l.load(ctx, atStart); err != nil {
		return err
	}
	close(l.loaded)
	if err := l.serveWrites(); err != nil {
		return err
	}
	if err := l.announceClaims(ctx); err != nil {
		return err
	}
	m, err := newMirror(l)
	if err != nil {
		return err
	}
	l.mirror.Store(m)
	l.wg.Add(2)
	go m.run()
	go l.catchUp()
	return nil
}

// connect opens the NATS connection. It reconnects for ever, and buffers
// nothing while disconnected: a publish then fails at once, and the
// mirror remembers its topic instead.
func (l *Link) connect() error {
	opts := []nats.Option{
		nats.Name("edgemux " + l.opt.GatewayID),
		nats.NoEcho(),
		nats.Timeout(l.opt.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			l.log.Warn("cluster link down", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			l.reconnects.Add(1)
			l.log.Info("cluster link up again", "server", nc.ConnectedUrlRedacted())
			if m := l.mirror.Load(); m != nil {
				m.linkBack()
				signal(l.relink)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			l.log.Warn("cluster link", "err", err)
		}),
	}
	auth, err := l.authOptions()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(strings.Join(l.opt.URLs, ","), append(opts, auth...)...)
	if err != nil {
		return fmt.Errorf("cluster: connect to %s: %w", strings.Join(l.opt.URLs, ","), err)
	}
	l.nc = nc
	return nil
}

// authOptions are TLS, credentials file or user and password.
func (l *Link) authOptions() ([]nats.Option, error) {
	var opts []nats.Option
	o := l.opt
	if o.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.CAFile))
	}
	if o.CertFile != "" {
		opts = append(opts, nats.ClientCert(o.CertFile, o.KeyFile))
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.User != "" {
		pw, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: password_file: %w", err)
		}
		opts = append(opts, nats.UserInfo(o.User, strings.TrimSpace(string(pw))))
	}
	return opts, nil
}

// claimID asks whether a live gateway answers for this id, then answers
// for it: two gateways with one id would drop each other's messages as
// their own.
func (l *Link) claimID() error {
	subject := l.opt.Prefix + ".gateway." + l.opt.GatewayID
	reply, err := l.nc.Request(subject, nil, 500*time.Millisecond)
	if err == nil {
		return fmt.Errorf("%w: %q answered by %s", ErrDuplicateID, l.opt.GatewayID, reply.Data)
	}
	if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
		return fmt.Errorf("cluster: gateway id probe: %w", err)
	}
	host, _ := os.Hostname()
	me := fmt.Sprintf("host %s pid %d since %s", host, os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	l.probe, err = l.nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(me)) })
	if err != nil {
		return fmt.Errorf("cluster: gateway id responder: %w", err)
	}
	return nil
}

// openBucket opens the KV bucket, creating it with history 1 if missing.
func (l *Link) openBucket(ctx context.Context) error {
	js, err := jetstream.New(l.nc,
		jetstream.WithPublishAsyncMaxPending(min(l.opt.MaxPending, 4096)),
		jetstream.WithPublishAsyncTimeout(5*time.Second),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			l.dropped.Add(1)
			if mr := l.mirror.Load(); mr != nil {
				mr.unacked(m.Subject)
			}
		}))
	if err != nil {
		return err
	}
	l.js = js
	if _, err := js.KeyValue(ctx, l.opt.Bucket); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("cluster: bucket %s: %w", l.opt.Bucket, err)
	}
	storage := jetstream.FileStorage
	if l.opt.Memory {
		storage = jetstream.MemoryStorage
	}
	_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: l.opt.Bucket, History: 1, Storage: storage, Replicas: l.opt.Replicas,
		Description: "edgemux: the last value of every topic the gateways share",
	})
	if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
		return fmt.Errorf("cluster: create bucket %s: %w", l.opt.Bucket, err)
	}
	return nil
}

// Close leaves the cluster: the mirror stops (what it still holds is
// not sent), acknowledgements in flight get a short grace, the
// connection closes. It is idempotent.
func (l *Link) Close() {
	l.stopOnce.Do(func() {
		close(l.done)
		if m := l.mirror.Load(); m != nil {
			m.stop()
		}
		l.wg.Wait()
		if l.js != nil {
			select {
			case <-l.js.PublishAsyncComplete():
			case <-time.After(time.Second):
			}
		}
		if l.nc != nil {
			l.nc.Close()
		}
	})
}

// Stats returns the counters.
func (l *Link) Stats() Stats {
	up := l.nc != nil && l.nc.IsConnected()
	d := l.dropped.Load()
	if l.ingress != nil {
		if n, err := l.ingress.Dropped(); err == nil {
			d += uint64(n)
		}
	}
	if m := l.mirror.Load(); m != nil {
		d += m.dropped()
	}
	return Stats{
		Sent: l.sent.Load(), Received: l.received.Load(), Dropped: d,
		LoopRejected: l.loopRejected.Load(), Unsent: l.unsent.Load(), Resent: l.resent.Load(),
		Invalid: l.invalid.Load(), Loaded: l.loadN.Load(), NotLoaded: l.notLoad.Load(),
		Forwarded: l.forwarded.Load(), ForwardFail: l.forwardFailed.Load(), Served: l.served.Load(),
		Reconnects: l.reconnects.Load(), CatchUps: l.catchUps.Load(), LinkUp: up, GatewayID: l.opt.GatewayID,
	}
}

// GatewayID is the id this gateway has in the cluster.
func (l *Link) GatewayID() string { return l.opt.GatewayID }
