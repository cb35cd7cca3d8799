// Package gateway wires edgemux together: epoll loops that accept and sniff
// on one shared port, the fd-indexed registry, the dispatcher and SPSC rings
// that hand classified connections to protocol-dedicated workers, the
// quarantine pool, forward routes, the admin HTTP endpoints and the topic
// bus behind every protocol.
//
// Lifecycle: New checks the configuration and builds everything but starts
// nothing; Run binds the port and blocks until its context ends or Shutdown
// or Close is called; Shutdown drains gracefully; Close is abrupt and
// idempotent; Reload swaps routes and limits without dropping live
// connections.
package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/coap"
	"github.com/edgemux/edgemux/protocols/modbus"
	"github.com/edgemux/edgemux/protocols/modbus/poll"
	"github.com/edgemux/edgemux/protocols/modbus/upstream"
	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/protocols/quarantine"
	"github.com/edgemux/edgemux/protocols/rudp"
	"github.com/edgemux/edgemux/protocols/websocket"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/registry/offheap"
	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/cluster"
	"github.com/edgemux/edgemux/route/north"
)

// Errors.
var (
	ErrClosed     = errors.New("gateway: closed")
	ErrRunning    = errors.New("gateway: already running")
	ErrNoHandler  = errors.New("gateway: no handler for protocol")
	ErrNotProber  = errors.New("gateway: probe pool's handler cannot probe")
	errRestartCfg = errors.New("gateway: needs a restart to take effect")
)

// Options are what the configuration file cannot say.
type Options struct {
	// Logger receives the gateway's logs; nil discards them.
	Logger *slog.Logger
	// Handlers adds or replaces protocol handlers by protocol name
	// ("private", "modbus", ..., or "quarantine").
	Handlers map[string]protocols.Handler
	// DatagramHandlers adds or replaces datagram handlers by class name
	// ("coap", "rudp"): the pool a udp.routes entry names for the class
	// runs it.
	DatagramHandlers map[string]protocols.DatagramHandler
}

// Gateway is one edgemux instance.
type Gateway struct {
	cfg     config.Config
	log     *slog.Logger
	rt      atomic.Pointer[runtimeConfig] // what Reload may swap
	reg     *registry.Registry
	bus     *bus.Bus
	book    *quarantine.Book
	ws      *websocket.Handler // the built-in ones, for counters and reloads (Options.Handlers may replace them in the pools)
	mb      *modbus.Handler
	up      *upstream.Set // Modbus devices edgemux is the master of (started by Run)
	poller  *poll.Poller  // their tags polled to the bus (started by Run, stopped before up closes)
	priv    *private.Handler
	streams *rudp.Streams // the private protocol's sessions over the reliable UDP core
	rudp    *rudp.Handler // their datagram handler
	coap    *coap.Handler // CoAP over TCP and UDP
	north   *north.Set    // northbound sinks (north.go); empty without north.sinks

	cluster atomic.Pointer[cluster.Link] // the bus across gateways; nil without one (cluster.go)

	udpBindFails int // tests: how many binds fail as if the port were taken for UDP
	pools        []*pool
	byPool       map[string]*pool
	workers      []*worker
	loops        []*loop
	limits       *admission
	metrics      *metrics
	admin        *admin
	fwd          *forwarder

	// The UDP side: the loops' sockets (set once by Run, before the admin
	// endpoints start) and the datagram counters.
	udp      []*udpSocket
	udpStats udpCounters
	dgPools  [numClasses]*pool // the pool each datagram class goes to; nil: dropped
	// dgBusy counts the datagram workers whose handlers are not idle
	// (dgramWorker.setBusy, after each Tick); at 0 the loops may take the
	// idle receive step (udp_moderate_linux.go).
	dgBusy atomic.Int32

	start    time.Time
	stages   *stageHist     // sampled stage times (stages.go)
	stageAt  []atomic.Int64 // by fd: when the loop posted a sampled event; nil when sampling is off
	ready    chan struct{}
	done     chan struct{} // closed when Run has released everything
	addr     netip.AddrPort
	running  atomic.Bool
	closing  atomic.Bool
	stopped  chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	// warnedRegistry: the one log line about fds beyond the registry.
	warnedRegistry atomic.Bool
	// What a drain did, for its log line: connections closed while
	// draining, and those cut (closed abruptly) when it ended.
	drainClosed atomic.Int64
	drainCut    atomic.Int64

	reloadMu sync.Mutex    // serialises Reload; guards applied
	applied  config.Config // the last config Reload applied (cfg at first)
}

// New validates cfg and builds a gateway; it starts nothing.
func New(cfg config.Config, opt Options) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The line index only names lines in Validate's errors; kept, a
	// file of 500 polled devices x 30 tags holds 9 MB of it for nothing.
	cfg.Lines = nil
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{
		cfg:     cfg,
		applied: cfg,
		log:     log.With("component", "gateway"),
		start:   time.Now(),
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		byPool:  map[string]*pool{},
	}
	drop, err := bus.ParseDropPolicy(cfg.Bus.Drop)
	if err != nil {
		return nil, err
	}
	g.bus = bus.New(bus.Options{
		MaxTopics: cfg.Bus.MaxTopics, TopicQuota: cfg.Bus.TopicQuota, MaxPayload: cfg.Bus.MaxPayload,
		Queue: cfg.Bus.Queue, QueueBytes: cfg.Bus.QueueBytes, Drop: drop,
	})
	if err := g.bus.Reserve(servedOwner, servedTopics(cfg)); err != nil {
		return nil, err
	}
	// The handlers that name their component in their own logger get log
	// as it is: a second With would print component= twice on each line.
	g.book = quarantine.NewBook(cfg.Quarantine, log, nil)
	g.ws = websocket.New(cfg.WebSocket, g.bus, log)
	g.mb = modbus.New(cfg.Modbus, g.bus, log)
	g.up = upstream.Build(cfg.Modbus.Upstream, log.With("component", "modbus-upstream"))
	g.mb.SetUpstream(g.up)
	g.poller = poll.New(pollDevices(cfg.Modbus.Upstream, g.up), g.bus, log.With("component", "modbus-poll"))
	// Polled tags' topics are the devices': a publish to one is a write.
	if err := g.bus.Claim(poll.Source, g.poller.Topics(), g.poller); err != nil {
		return nil, err
	}
	g.priv = private.New(cfg.Private, g.bus, log)
	g.coap = coap.New(cfg.CoAP, g.bus, log.With("component", "coap"))
	handlers := map[string]protocols.Handler{
		"private":    g.priv,
		"websocket":  g.ws,
		"modbus":     g.mb,
		"coap":       g.coap,
		"quarantine": quarantine.NewHandler(g.book, cfg.Quarantine),
	}
	for name, h := range opt.Handlers {
		handlers[name] = h
	}
	rt, err := compileRuntime(cfg)
	if err != nil {
		return nil, err
	}
	g.rt.Store(rt)
	g.reg = registry.New(registrySize(cfg))
	g.stages = &stageHist{}
	if cfg.Admin.StageSample > 0 {
		// Pointer-free and as long-lived as g (8 bytes an fd): outside
		// the heap, the collector's goal does not grow with it.
		g.stageAt = offheap.Slice[atomic.Int64](g, g.reg.Size())
	}
	g.limits = newAdmission()
	dgram, err := g.datagramHandlers(opt)
	if err != nil {
		return nil, err
	}
	if err := g.buildPools(handlers, dgram); err != nil {
		return nil, err
	}
	if err := g.buildNorth(); err != nil {
		return nil, err
	}
	g.metrics = newMetrics(g)
	if g.admin, err = newAdmin(g); err != nil {
		g.north.Close()
		return nil, err
	}
	g.fwd = newForwarder(g)
	return g, nil
}

// Bus is the topic bus behind every protocol.
func (g *Gateway) Bus() *bus.Bus { return g.bus }

// Book is the quarantine record.
func (g *Gateway) Book() *quarantine.Book { return g.book }

// Ready is closed once Run has bound the port.
func (g *Gateway) Ready() <-chan struct{} { return g.ready }

// Addr is the bound address; valid after Ready.
func (g *Gateway) Addr() netip.AddrPort { return g.addr }

// datagramHandlers are the datagram handlers by class name: the
// reliable UDP core carrying the private protocol (rudp), CoAP, and those
// of opt, which add or replace.
func (g *Gateway) datagramHandlers(opt Options) (map[string]protocols.DatagramHandler, error) {
	rcfg, err := rudpConfig(g.cfg.RUDP)
	if err != nil {
		return nil, err
	}
	h, streams, err := rudp.NewStreamHandler(rcfg, g.priv, rudp.StreamOptions{MaxInput: g.cfg.Limits.MaxInput})
	if err != nil {
		return nil, err
	}
	g.rudp, g.streams = h, streams
	hs := map[string]protocols.DatagramHandler{"rudp": h, "coap": g.coap}
	for name, h := range opt.DatagramHandlers {
		hs[name] = h
	}
	return hs, nil
}

// rudpConfig is the rudp section as the core takes it, with the sealed
// mode's keys read from key_file.
func rudpConfig(c config.RUDP) (rudp.Config, error) {
	rc := rudp.Config{
		MaxDatagram: c.MaxDatagram, MaxMessage: c.MaxMessage, Window: c.Window,
		SendQueue: c.SendQueue, DatagramQueue: c.DatagramQueue,
		IdleTimeout: c.IdleTimeout, KeepAlive: c.KeepAlive, HandshakeTimeout: c.HandshakeTimeout,
		MaxAckDelay: c.MaxAckDelay, InitialRTT: c.InitialRTT, MinRTO: c.MinRTO, MaxRTO: c.MaxRTO,
		CookieLifetime: c.CookieLifetime, CookieRotation: c.CookieRotation,
		MaxSessions: c.MaxSessions, MemoryBudget: c.MemoryBudget, PendingRetries: c.PendingRetries,
	}
	if c.KeyFile != "" {
		keys, err := rudp.LoadKeys(c.KeyFile)
		if err != nil {
			return rudp.Config{}, fmt.Errorf("gateway: rudp.key_file: %w", err)
		}
		rc.Keys = keys
	}
	return rc, nil
}

// udpSockets are the loops' UDP sockets on the shared port.
func (g *Gateway) udpSockets() []*udpSocket { return g.udp }

// servedOwner reserves on the bus the topics the configuration serves.
const servedOwner = "config"

// servedTopics are the bus topics the configuration serves: the Modbus
// register map's tags and the stats topic of the dashboard. The bus keeps
// their values however full its cache (bus.Reserve).
func servedTopics(cfg config.Config) []string {
	topics := []string{StatsTopic}
	for _, t := range cfg.Modbus.Tags {
		topics = append(topics, t.Topic)
	}
	return topics
}

// nowMs is the gateway's coarse clock: milliseconds since New, wrapping at
// 49 days; only differences are used.
func (g *Gateway) nowMs() uint32 { return uint32(time.Since(g.start) / time.Millisecond) }

// registrySize is how many fds the registry (and each worker's table)
// covers. The kernel hands out the lowest free fd number, so a connection's
// fd stays below the number of fds open at once: the connections
// (limits.max_conns, which forwarded ones count against too; a forward
// holds a second fd to its backend), the admin server's (admin.max_conns),
// and the process's own (loops' epoll, eventfd, listener and UDP sockets,
// the runtime's, logs), for which fdReserve leaves room. Sizing from
// RLIMIT_NOFILE instead would cost 64 MiB of slots plus 8 MiB per worker at
// the common hard limit of 1,048,576, which Go raises the soft limit to at
// start. An fd beyond the table is refused at accept and counted
// (edgemux_refused_total{reason="registry"}), never indexed.
func registrySize(cfg config.Config) int {
	n := 2*cfg.Limits.MaxConns + cfg.Admin.MaxConns + fdReserve
	return min(n, rlimitNoFile())
}

// fdReserve covers the fds the process holds besides connections.
const fdReserve = 256

func defaultLoops(n int) int {
	if n > 0 {
		return n
	}
	return runtime.NumCPU()
}
