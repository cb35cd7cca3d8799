package websocket

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gorilla "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// Defaults for zero (or negative) fields of config.WebSocket; config's
// Defaults uses the same values.
const (
	DefaultPath             = "/ws"
	DefaultSubprotocol      = "edgemux.v1"
	DefaultMaxHeaderBytes   = 8192
	DefaultMaxMessage       = 65536
	DefaultHighWater        = 65536
	DefaultSlowConsumer     = "close"
	DefaultPingInterval     = 30 * time.Second
	DefaultMissedPongs      = 2
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultMaxSubs          = 64
)

// Hard caps: larger configured values are clamped to them.
const (
	MaxHeaderBytesCap = 64 << 10 // the gateway peeks at most this much
	MaxMessageCap     = 16 << 20
)

// writeBufferSize is gorilla's frame buffer, borrowed from a pool for one
// message at a time; bigger messages go out as one frame anyway (gorilla
// writes the rest from the caller's slice).
const writeBufferSize = 4096

// flushAt bounds the output a session stages before handing it to
// Conn.Write, so a burst of deliveries never grows one buffer unbounded.
const flushAt = 32 << 10

// Stats are a Handler's counters since New.
type Stats struct {
	Sessions          uint64 // connections handed over
	Upgrades          uint64 // handshakes completed (101)
	BadRequests       uint64 // handshakes refused with 400 or 405
	Forbidden         uint64 // handshakes refused with 403 (origin)
	NotFound          uint64 // handshakes refused with 404 (path)
	HeaderTooLarge    uint64 // handshakes refused with 431
	HandshakeTimeouts uint64 // requests incomplete after handshake_timeout
	Messages          uint64 // data messages received
	Published         uint64 // pubs accepted by the bus
	Delivered         uint64 // deliveries staged for the peer
	Dropped           uint64 // deliveries the bus dropped (a full queue), told to the peer with {"op":"dropped"}
	Errors            uint64 // {"op":"error"} replies (the connection stays)
	Violations        uint64 // connections closed with 1002 or 1007
	TooBig            uint64 // connections closed with 1009
	PeerCloses        uint64 // close frames received
	PongTimeouts      uint64 // connections closed for missed pongs
	SlowClosed        uint64 // connections closed as slow consumers (policy close, or cut off by the bus)
	SlowDropped       uint64 // messages dropped while over high_water (policy drop)
	Codecs            uint64 // gorilla Conns made for leases beyond those upgrades left (lease.go)
	Encoded           uint64 // delivery JSON texts encoded: once per live message, shared by its subscribers
}

// Counters lists the Stats fields under snake_case names, in a fixed order.
func (st Stats) Counters() []protocols.Counter {
	return []protocols.Counter{
		{Name: "sessions", N: st.Sessions}, {Name: "upgrades", N: st.Upgrades}, {Name: "bad_requests", N: st.BadRequests},
		{Name: "forbidden", N: st.Forbidden}, {Name: "not_found", N: st.NotFound}, {Name: "header_too_large", N: st.HeaderTooLarge},
		{Name: "handshake_timeouts", N: st.HandshakeTimeouts}, {Name: "messages", N: st.Messages}, {Name: "published", N: st.Published},
		{Name: "delivered", N: st.Delivered}, {Name: "dropped", N: st.Dropped}, {Name: "errors", N: st.Errors}, {Name: "violations", N: st.Violations}, {Name: "too_big", N: st.TooBig},
		{Name: "peer_closes", N: st.PeerCloses}, {Name: "pong_timeouts", N: st.PongTimeouts}, {Name: "slow_closed", N: st.SlowClosed},
		{Name: "slow_dropped", N: st.SlowDropped}, {Name: "codecs", N: st.Codecs}, {Name: "encoded", N: st.Encoded},
	}
}

// counters are the atomic twins of Stats. Those that count messages are
// added to on every core at once, so they keep a cell per stripe
// (protocols.StripedCounter), as the private handler's do; the rest count
// rarer events.
type counters struct {
	sessions, upgrades, badRequests, forbidden, notFound, headerTooLarge atomic.Uint64
	handshakeTimeouts, dropped, errors                                   atomic.Uint64
	violations, tooBig, peerCloses, pongTimeouts, slowClosed, slowDrop   atomic.Uint64
	codecs                                                               atomic.Uint64
	messages, published, delivered, encoded                              protocols.StripedCounter
}

// Handler serves WebSocket connections for the workers of one pool. It is
// safe for concurrent use; each connection's state is its session.
type Handler struct {
	bus *bus.Bus
	log *slog.Logger
	set atomic.Pointer[settings] // swapped by Reload

	// writePool holds gorilla's frame buffers. It has no New on purpose
	// (gorilla #953): gorilla allocates when Get returns nil, and a New
	// would hand it a value of the wrong type.
	writePool  sync.Pool
	leases     leases                       // gorilla Conns and staging buffers, held during one call
	buf        protocols.Scratch[byte]      // message and JSON buffers, held during one call
	deliveries deliverScratches             // deliver's buffers, held during one call
	requests   requestPool                  // parsed handshake requests, held during one upgrade
	gate       atomic.Pointer[operatorGate] // who is an operator; nil: nobody

	n counters
}

// OperatorCheck tells whether a WebSocket handshake comes from an
// operator, from the peer's address and the request's headers (of which
// Authorization and Cookie are kept for it). Operator sessions may
// subscribe to the gateway's own topics (protocols.GatewayTopic); other
// sessions are answered {"op":"error","code":"forbidden"}.
type OperatorCheck func(peer netip.AddrPort, h http.Header) bool

// operatorGate is an OperatorCheck with the epoch sessions it admitted
// remember (0 is never an epoch: it means "not an operator").
type operatorGate struct {
	check OperatorCheck
	epoch uint32
}

// SetOperatorCheck makes f decide which new sessions are operators (nil:
// none). Sessions the previous check admitted lose that standing: they
// are closed with 1008 at their next call (a delivery or a ping), so the
// client reconnects and meets the new rules.
func (h *Handler) SetOperatorCheck(f OperatorCheck) {
	for {
		old := h.gate.Load()
		next := &operatorGate{check: f, epoch: 1}
		if old != nil && old.epoch+1 != 0 {
			next.epoch = old.epoch + 1
		}
		if h.gate.CompareAndSwap(old, next) {
			return
		}
	}
}

// operatorEpoch is the epoch of the check in force when it admits a
// handshake, else 0.
func (h *Handler) operatorEpoch(peer netip.AddrPort, hd http.Header) uint32 {
	if g := h.gate.Load(); g != nil && g.check != nil && g.check(peer, hd) {
		return g.epoch
	}
	return 0
}

var _ protocols.Handler = (*Handler)(nil)

// New returns a Handler that publishes into and subscribes from b. Zero
// cfg fields take the package defaults; a nil log discards.
func New(cfg config.WebSocket, b *bus.Bus, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{bus: b, log: log.With("component", "websocket")}
	// Keep only modest buffers, so one big message does not pin memory.
	h.buf.Min, h.buf.Max = 512, 2*flushAt
	h.leases.init(&h.writePool)
	h.set.Store(h.newSettings(cfg))
	return h
}

// settings are what Reload swaps: the configuration, defaults filled in,
// and what is built from it. A call reads them once, when it borrows its
// lease, so one call never sees two configurations.
type settings struct {
	cfg      config.WebSocket
	drop     bool // slow_consumer: drop
	upgrader gorilla.Upgrader
}

func (h *Handler) newSettings(cfg config.WebSocket) *settings {
	st := &settings{cfg: withDefaults(cfg)}
	st.drop = st.cfg.SlowConsumer == "drop"
	st.upgrader = gorilla.Upgrader{
		ReadBufferSize:    0, // gorilla reads through the lease's own bufio.Reader (lease.go)
		WriteBufferSize:   writeBufferSize,
		WriteBufferPool:   &h.writePool,
		Subprotocols:      []string{st.cfg.Subprotocol},
		EnableCompression: st.cfg.Compression,
		CheckOrigin:       originChecker(st.cfg.AllowedOrigins),
		Error:             h.handshakeError,
	}
	return st
}

// Reload applies cfg: new handshakes use it at once, open sessions from
// their next call (a new ping interval, say, from the next ping). A
// session keeps the compression it negotiated.
func (h *Handler) Reload(cfg config.WebSocket) {
	h.set.Store(h.newSettings(cfg))
	h.log.Debug("reloaded", "path", h.Config().Path, "allowed_origins", h.Config().AllowedOrigins)
}

// Config returns the configuration in effect, defaults filled in.
func (h *Handler) Config() config.WebSocket { return h.set.Load().cfg }

// Stats returns a snapshot of the counters.
func (h *Handler) Stats() Stats {
	n := &h.n
	return Stats{
		Sessions: n.sessions.Load(), Upgrades: n.upgrades.Load(),
		BadRequests: n.badRequests.Load(), Forbidden: n.forbidden.Load(),
		NotFound: n.notFound.Load(), HeaderTooLarge: n.headerTooLarge.Load(),
		HandshakeTimeouts: n.handshakeTimeouts.Load(), Messages: n.messages.Load(),
		Published: n.published.Load(), Delivered: n.delivered.Load(), Dropped: n.dropped.Load(), Errors: n.errors.Load(),
		Violations: n.violations.Load(), TooBig: n.tooBig.Load(), PeerCloses: n.peerCloses.Load(),
		PongTimeouts: n.pongTimeouts.Load(), SlowClosed: n.slowClosed.Load(), SlowDropped: n.slowDrop.Load(),
		Codecs: n.codecs.Load(), Encoded: n.encoded.Load(),
	}
}

// Open starts a session: it holds no buffer until input arrives, and the
// handshake deadline runs from now.
func (h *Handler) Open(c protocols.Conn) (protocols.Session, error) {
	n := h.n.sessions.Add(1)
	c.SetTimer(h.set.Load().cfg.HandshakeTimeout)
	return &session{h: h, conn: c, stripe: protocols.StripeFor(n)}, nil
}

// withDefaults fills zero fields and clamps the rest to the caps.
func withDefaults(c config.WebSocket) config.WebSocket {
	orDefault := func(v *int, def, limit int) {
		if *v <= 0 {
			*v = def
		}
		*v = min(*v, limit)
	}
	orDefault(&c.MaxHeaderBytes, DefaultMaxHeaderBytes, MaxHeaderBytesCap)
	orDefault(&c.MaxMessage, DefaultMaxMessage, MaxMessageCap)
	orDefault(&c.HighWater, DefaultHighWater, 1<<30)
	orDefault(&c.MissedPongs, DefaultMissedPongs, 255) // session counts in a uint8
	orDefault(&c.MaxSubs, DefaultMaxSubs, 1<<16)
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.Subprotocol == "" {
		c.Subprotocol = DefaultSubprotocol
	}
	if c.SlowConsumer != "drop" {
		c.SlowConsumer = DefaultSlowConsumer
	}
	if c.PingInterval <= 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return c
}

// originChecker is CheckOrigin for allowed_origins: nil (empty) keeps
// gorilla's same-origin check, ["*"] allows any, else the Origin must be
// in the list (compared without case). A request without Origin is not
// from a browser and passes, as with gorilla's default.
func originChecker(allowed []string) func(*http.Request) bool {
	switch {
	case len(allowed) == 0:
		return nil
	case len(allowed) == 1 && allowed[0] == "*":
		return func(*http.Request) bool { return true }
	}
	list := append([]string(nil), allowed...)
	return func(r *http.Request) bool {
		origin := r.Header.Get("Origin")
		if origin == "" {
			return true
		}
		for _, o := range list {
			if strings.EqualFold(o, origin) {
				return true
			}
		}
		return false
	}
}
