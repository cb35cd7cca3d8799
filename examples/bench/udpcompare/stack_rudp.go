package main

// edgemux's reliable UDP core. The server is the production path: a
// gateway built by gateway.New with the rudp handler on a pool that
// udp.routes sends the rudp class to (epoll loops, recvmmsg, rings,
// workers, sendmmsg). The clients are rudp.Client values driven over real
// UDP sockets, many to a socket when asked (rudpGroup).

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/gateway"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/rudp"
)

// rudpServer is a running gateway.
type rudpServer struct {
	g    *gateway.Gateway
	done chan error
}

func (s *rudpServer) addr() netip.AddrPort { return s.g.Addr() }
func (s *rudpServer) close()               { s.g.Close(); <-s.done }

func serveRUDP(app *serverApp, _ bool) (server, error) {
	cfg, err := config.Parse(config.DefaultYAML)
	if err != nil {
		return nil, err
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.Loops = 2 // one per core here
	cfg.Pools["rudp"] = config.Pool{Workers: 2}
	cfg.UDP.Routes = map[string]string{"rudp": "rudp"}
	if d, err := time.ParseDuration(os.Getenv(envReceiveDelay)); err == nil {
		cfg.UDP.ReceiveDelay = d
	}
	if d, err := time.ParseDuration(os.Getenv(envReceiveDelayIdle)); err == nil {
		cfg.UDP.ReceiveDelayIdle = d
	}
	h, err := rudp.NewHandler(rudpConfig(), rudpApp{app})
	if err != nil {
		return nil, err
	}
	g, err := gateway.New(cfg, gateway.Options{DatagramHandlers: map[string]protocols.DatagramHandler{"rudp": h}})
	if err != nil {
		return nil, err
	}
	s := &rudpServer{g: g, done: make(chan error, 1)}
	go func() { s.done <- g.Run(context.Background()) }()
	select {
	case <-g.Ready():
		return s, nil
	case err := <-s.done:
		return nil, err
	}
}

// rudpApp is the handler's App: messages to the serverApp, echoes back on
// the session (the worker's goroutine may call Send).
type rudpApp struct{ app *serverApp }

func (a rudpApp) Opened(*rudp.Conn) { a.app.opened.Add(1) }
func (a rudpApp) Message(c *rudp.Conn, m []byte) {
	if a.app.handle(m) {
		c.Send(m)
	}
}
func (a rudpApp) Datagram(*rudp.Conn, []byte) {}
func (a rudpApp) Closed(*rudp.Conn, error)    { a.app.closed.Add(1) }

// rudpHandshakes is how many sessions of one socket may be in their
// handshake at once: the server keeps 256 pending RETRYs per worker and
// drops the rest, so a burst of 100,000 INITIALs would mostly wait for
// their retransmission.
const rudpHandshakes = 64

func dialRUDP(ctx context.Context, cfg dialConfig) (clients, error) {
	sockets := cfg.sockets
	if sockets <= 0 || sockets > cfg.n {
		sockets = cfg.n
	}
	cs := &rudpClients{groups: make([]*rudpGroup, sockets), of: make([]groupSlot, cfg.n)}
	for g := range sockets {
		conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(cfg.server))
		if err != nil {
			cs.close()
			return nil, err
		}
		conn.SetReadBuffer(4 << 20)
		conn.SetWriteBuffer(4 << 20)
		cs.groups[g] = newRUDPGroup(conn, cfg.onReply)
	}
	for i := range cfg.n {
		g := cs.groups[i%sockets]
		cs.of[i] = groupSlot{g: g, local: len(g.members)}
		g.members = append(g.members, rudpMember{index: i})
	}
	for _, g := range cs.groups {
		cs.wg.Add(1)
		go func() { defer cs.wg.Done(); g.run() }()
	}
	for cs.established() < cfg.n && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	return cs, nil
}

// rudpClients are sessions spread over groups, one group per socket.
type rudpClients struct {
	groups []*rudpGroup
	of     []groupSlot // session index -> its group and place there
	wg     sync.WaitGroup
}

type groupSlot struct {
	g     *rudpGroup
	local int
}

func (cs *rudpClients) send(i int, msg []byte) error {
	s := cs.of[i]
	return s.g.post(s.local, msg)
}

func (cs *rudpClients) established() int {
	n := 0
	for _, g := range cs.groups {
		if g != nil {
			n += int(g.up.Load())
		}
	}
	return n
}

// datagrams is what the clients wrote and read, all sockets together: the
// server's datagrams in and out.
func (cs *rudpClients) datagrams() (sent, got int64) {
	for _, g := range cs.groups {
		if g != nil {
			sent += g.sent.Load()
			got += g.got.Load()
		}
	}
	return sent, got
}

// The rudp timers of both ends, from the environment so that the child
// server takes the parent's flags: UDPCOMPARE_RUDP_KEEPALIVE and
// UDPCOMPARE_RUDP_IDLE_TIMEOUT (durations; unset: the defaults).
const (
	envRUDPKeepalive   = "UDPCOMPARE_RUDP_KEEPALIVE"
	envRUDPIdleTimeout = "UDPCOMPARE_RUDP_IDLE_TIMEOUT"
	// envReceiveDelay is the gateway's udp.receive_delay (unset: its
	// default).
	envReceiveDelay = "UDPCOMPARE_RECEIVE_DELAY"
	// envReceiveDelayIdle is its udp.receive_delay_idle.
	envReceiveDelayIdle = "UDPCOMPARE_RECEIVE_DELAY_IDLE"
)

// rudpConfig is the rudp.Config of both ends: the defaults but for the
// timers the environment sets.
func rudpConfig() rudp.Config {
	var c rudp.Config
	c.KeepAlive, _ = time.ParseDuration(os.Getenv(envRUDPKeepalive))
	c.IdleTimeout, _ = time.ParseDuration(os.Getenv(envRUDPIdleTimeout))
	return c
}

func (cs *rudpClients) close() {
	for _, g := range cs.groups {
		if g != nil {
			g.conn.Close()
		}
	}
	cs.wg.Wait()
}

// rudpGroup drives the clients that share one socket, on one goroutine:
// it reads the socket, hands each datagram to its client (by session id;
// RETRY by the client's nonce, HANDSHAKE by the nonce its ACCEPT echoes),
// runs the clients' timers in deadline order, and takes messages posted
// by other goroutines from an inbox.
type rudpGroup struct {
	conn    *net.UDPConn
	onReply func(i int, msg []byte)
	members []rudpMember
	started int // members whose client exists, in order
	shaking int // of those, still in their handshake
	byNonce map[uint64]int
	byID    map[uint64]int
	timers  timerHeap
	touched []int        // members given messages from the inbox
	up      atomic.Int64 // established
	sent    atomic.Int64 // datagrams written
	got     atomic.Int64 // datagrams read
	out     []byte
	read    []byte

	mu      sync.Mutex
	inbox   []posted
	spare   []posted
	pending atomic.Bool
}

type rudpMember struct {
	index   int // the session's index in the run
	c       *rudp.Client
	due     time.Time // the deadline a timer entry stands for
	up      bool
	touched bool // in touched, to be serviced after the inbox
}

type posted struct {
	local int
	msg   []byte
}

func newRUDPGroup(conn *net.UDPConn, onReply func(int, []byte)) *rudpGroup {
	return &rudpGroup{conn: conn, onReply: onReply, byNonce: map[uint64]int{}, byID: map[uint64]int{},
		out: make([]byte, 0, rudp.MaxDatagram), read: make([]byte, 0, 4096)}
}

// post queues msg for member local and wakes the driver.
func (g *rudpGroup) post(local int, msg []byte) error {
	g.mu.Lock()
	g.inbox = append(g.inbox, posted{local, append([]byte(nil), msg...)})
	g.mu.Unlock()
	if !g.pending.Swap(true) {
		g.conn.SetReadDeadline(time.Unix(1, 0)) // interrupt the driver's read
	}
	return nil
}

// run is the driver loop; it ends when the socket is closed.
func (g *rudpGroup) run() {
	buf := make([]byte, 65536)
	for {
		now := time.Now()
		g.startMore(now)
		g.fireTimers(now)
		wait := now.Add(100 * time.Millisecond)
		if len(g.timers) > 0 && g.timers[0].at.Before(wait) {
			wait = g.timers[0].at
		}
		g.conn.SetReadDeadline(wait)
		if g.pending.Swap(false) {
			g.drainInbox()
			continue
		}
		n, err := g.conn.Read(buf)
		switch {
		case err == nil:
			g.got.Add(1)
			g.input(buf[:n], time.Now())
		case errors.Is(err, os.ErrDeadlineExceeded):
		default:
			return
		}
	}
}

// startMore creates clients while fewer than rudpHandshakes handshake.
func (g *rudpGroup) startMore(now time.Time) {
	for g.started < len(g.members) && g.shaking < rudpHandshakes {
		c, err := rudp.NewClient(rudpConfig(), nil, now)
		if err != nil {
			panic(fmt.Sprintf("rudp: a default config fails: %v", err))
		}
		g.members[g.started].c = c
		g.started++
		g.shaking++
		g.service(g.started-1, now)
	}
}

func (g *rudpGroup) drainInbox() {
	g.mu.Lock()
	batch := g.inbox
	g.inbox = g.spare[:0]
	g.mu.Unlock()
	// Every message first, then one service per client: messages posted
	// together leave packed into as few datagrams as fit, as quic-go's
	// connection loop packs what its stream got meanwhile.
	now := time.Now()
	touched := g.touched[:0]
	for _, p := range batch {
		m := &g.members[p.local]
		if m.c == nil {
			continue
		}
		m.c.Send(p.msg)
		if !m.touched {
			m.touched = true
			touched = append(touched, p.local)
		}
	}
	for _, local := range touched {
		g.members[local].touched = false
		g.service(local, now)
	}
	g.touched = touched[:0]
	clear(batch)
	g.spare = batch[:0]
}

// input hands a datagram to the client it is for.
func (g *rudpGroup) input(d []byte, now time.Time) {
	h, err := rudp.ParseHeader(d)
	if err != nil {
		return
	}
	var local int
	var ok bool
	switch h.Type {
	case rudp.TypeData:
		local, ok = g.byID[h.SessionID]
	case rudp.TypeRetry:
		local, ok = g.byNonce[h.SessionID]
	case rudp.TypeHandshake:
		if nonce, found := acceptNonce(d); found {
			local, ok = g.byNonce[nonce]
		}
	}
	if !ok {
		return
	}
	m := &g.members[local]
	m.c.Input(d, now)
	if !m.up && m.c.State() == rudp.StateEstablished {
		m.up = true
		g.shaking--
		g.up.Add(1)
		g.byID[m.c.ID()] = local
	}
	for g.onReply != nil {
		msg, ok := m.c.ReadMessage(g.read[:0])
		if !ok {
			break
		}
		g.read = msg[:0]
		g.onReply(m.index, msg)
	}
	g.service(local, now)
}

// acceptNonce finds the client nonce a plain HANDSHAKE's ACCEPT frame
// echoes (SPEC.md 2.4: the frame type 0x06, then the nonce), skipping
// PADDING frames before it.
func acceptNonce(d []byte) (uint64, bool) {
	for i := rudp.HeaderLen; i < len(d)-4; i++ {
		switch d[i] {
		case 0x00: // PADDING
		case 0x06: // ACCEPT
			if i+9 > len(d) {
				return 0, false
			}
			return binary.BigEndian.Uint64(d[i+1:]), true
		default:
			return 0, false
		}
	}
	return 0, false
}

// service runs member local's timers, sends what it has, and files its
// next deadline.
func (g *rudpGroup) service(local int, now time.Time) {
	m := &g.members[local]
	m.c.Tick(now)
	for {
		out, ok := m.c.AppendDatagram(g.out[:0], now)
		if !ok {
			break
		}
		if !m.up {
			if h, err := rudp.ParseHeader(out); err == nil && h.Type == rudp.TypeInitial {
				g.byNonce[h.SessionID] = local
			}
		}
		g.conn.Write(out)
		g.sent.Add(1)
	}
	if m.c.State() == rudp.StateClosed {
		if !m.up {
			g.shaking--
			m.up = true // counted out of the handshakes; never established
		}
		return
	}
	if d := m.c.NextDeadline(now); !d.IsZero() && !d.Equal(m.due) {
		m.due = d
		heap.Push(&g.timers, timerEntry{at: d, local: local})
	}
}

// fireTimers services the members whose deadline has passed.
func (g *rudpGroup) fireTimers(now time.Time) {
	for len(g.timers) > 0 && !g.timers[0].at.After(now) {
		e := heap.Pop(&g.timers).(timerEntry)
		if m := &g.members[e.local]; m.due.Equal(e.at) {
			m.due = time.Time{}
			g.service(e.local, now)
		}
	}
}

// timerHeap orders members' deadlines; an entry whose member has moved
// on (its due differs) is skipped when it comes up.
type timerEntry struct {
	at    time.Time
	local int
}

type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
