package rudp

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// sim runs one server Endpoint and clients over a lossy in-memory
// network on a virtual clock: every step jumps to the next thing due (a
// datagram's arrival, a timer, an application event).
type sim struct {
	t       testing.TB
	now     time.Time
	net     *lossy.Network
	ep      *Endpoint
	server  netip.AddrPort
	clients []*simClient
	byAddr  map[netip.AddrPort]*simClient
	rng     *rand.Rand
	buf     []byte
	// onServerMessage sees every reliable message a server session reads.
	onServerMessage func(c *Conn, msg []byte)
	// wake, when set, is the next application event; app runs it.
	wake func() time.Time
	app  func(now time.Time)
	// tap sees every datagram put on the wire.
	tap func(up bool, b []byte)
	// paused stops the server application from reading (flow control).
	paused bool
	// Bytes the server sent to and received from each address.
	sentTo, recvFrom map[netip.AddrPort]int
}

// simClient is one client and what it received.
type simClient struct {
	*Client
	addr     netip.AddrPort
	received [][]byte
}

var simStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newSim(t testing.TB, seed uint64, cfg Config, net lossy.Config) *sim {
	t.Helper()
	net.Seed = seed
	net.Server = netip.MustParseAddrPort("10.0.0.1:5020")
	s := &sim{
		t:        t,
		now:      simStart,
		net:      lossy.New(net),
		server:   net.Server,
		byAddr:   make(map[netip.AddrPort]*simClient),
		sentTo:   make(map[netip.AddrPort]int),
		recvFrom: make(map[netip.AddrPort]int),
		rng:      rand.New(rand.NewPCG(seed, 7)),
		buf:      make([]byte, 0, MaxDatagram),
	}
	var secret [32]byte
	binary.BigEndian.PutUint64(secret[:], seed)
	ep, err := NewEndpoint(cfg, EndpointOptions{
		Secret: secret,
		Rand:   rand.NewChaCha8(secret),
		OnReadable: func(c *Conn) {
			for !s.paused {
				msg, ok := c.ReadMessage(nil)
				if !ok {
					break
				}
				if s.onServerMessage != nil {
					s.onServerMessage(c, msg)
				}
			}
		},
	}, s.now)
	if err != nil {
		t.Fatal(err)
	}
	s.ep = ep
	return s
}

// addClient starts a client at 10.1.x.y:4000.
func (s *sim) addClient(cfg Config) *simClient {
	s.t.Helper()
	n := len(s.clients)
	addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(n >> 8), byte(n)}), 4000)
	seed := [32]byte{byte(n), byte(n >> 8), byte(n >> 16), 1}
	c, err := NewClient(cfg, rand.NewChaCha8(seed), s.now)
	if err != nil {
		s.t.Fatal(err)
	}
	sc := &simClient{Client: c, addr: addr}
	s.clients = append(s.clients, sc)
	s.byAddr[addr] = sc
	s.flushClient(sc)
	return sc
}

// flush sends whatever the endpoint and the clients have.
func (s *sim) flush() {
	for {
		out, to, ok := s.ep.AppendDatagram(s.buf[:0], s.now)
		if !ok {
			break
		}
		s.sentTo[to] += len(out)
		if s.tap != nil {
			s.tap(false, out)
		}
		s.net.Send(s.server, to, out, s.now)
	}
	for _, c := range s.clients {
		s.flushClient(c)
	}
}

func (s *sim) flushClient(c *simClient) {
	for {
		out, ok := c.AppendDatagram(s.buf[:0], s.now)
		if !ok {
			return
		}
		if s.tap != nil {
			s.tap(true, out)
		}
		s.net.Send(c.addr, s.server, out, s.now)
	}
}

// next is when something is next due.
func (s *sim) next(limit time.Time) time.Time {
	t := limit
	earliest := func(d time.Time) {
		if !d.IsZero() && d.Before(t) {
			t = d
		}
	}
	if d, ok := s.net.Next(); ok {
		earliest(d)
	}
	earliest(s.ep.NextDeadline())
	for _, c := range s.clients {
		earliest(c.NextDeadline(s.now))
	}
	if s.wake != nil {
		earliest(s.wake())
	}
	if t.Before(s.now) {
		t = s.now
	}
	return t
}

// step advances to the next event and handles it.
func (s *sim) step(limit time.Time) {
	s.now = s.next(limit)
	s.net.Deliver(s.now, func(from, to netip.AddrPort, b []byte) {
		if to == s.server {
			s.recvFrom[from] += len(b)
			s.ep.Input(from, b, s.now)
			return
		}
		if c := s.byAddr[to]; c != nil {
			c.Input(b, s.now)
			for {
				msg, ok := c.ReadMessage(nil)
				if !ok {
					break
				}
				c.received = append(c.received, msg)
			}
		}
	})
	s.ep.Tick(s.now)
	for _, c := range s.clients {
		if d := c.NextDeadline(s.now); !d.IsZero() && !d.After(s.now) {
			c.Tick(s.now)
		}
	}
	if s.app != nil {
		s.app(s.now)
	}
	s.flush()
}

// runUntil steps until the virtual clock reaches end or done says so;
// steps bounds the work (a livelock fails the test instead of hanging).
func (s *sim) runUntil(end time.Time, done func() bool) {
	s.t.Helper()
	for steps := 0; s.now.Before(end); steps++ {
		if done != nil && done() {
			return
		}
		if steps > 2_000_000 {
			for _, c := range s.clients {
				s.t.Logf("client %d: %s", c.id, c.debugString())
			}
			for _, c := range s.ep.sessions {
				s.t.Logf("server %d: %s now=%d", c.id, c.debugString(), s.ep.now)
			}
			nd, _ := s.net.Next()
			s.t.Logf("ep next %v net next %v wheel count %d cur %d ready %v", s.ep.NextDeadline().Sub(simStart), nd.Sub(simStart), s.ep.wheel.count, s.ep.wheel.cur, s.ep.ready != nil)
			for _, c := range s.clients {
				s.t.Logf("client deadline %v", c.NextDeadline(s.now).Sub(simStart))
			}
			s.t.Fatalf("simulation does not progress at %v", s.now.Sub(simStart))
		}
		s.step(end)
	}
}

// established runs until every client has its session.
func (s *sim) established() {
	s.t.Helper()
	s.runUntil(s.now.Add(time.Minute), func() bool {
		for _, c := range s.clients {
			if c.State() == StateHandshake {
				return false
			}
		}
		return true
	})
	for i, c := range s.clients {
		if c.State() != StateEstablished {
			s.t.Fatalf("client %d: state %v (%v)", i, c.State(), c.Err())
		}
	}
}

// readAll reads what the server application left while paused.
func (s *sim) readAll() {
	for _, c := range s.ep.sessions {
		s.ep.opts.OnReadable(c)
	}
}

// noImpairment is a clean 10 ms each way network.
func noImpairment() lossy.Config {
	return lossy.Config{Up: lossy.Impairment{Delay: 10 * time.Millisecond}, Down: lossy.Impairment{Delay: 10 * time.Millisecond}}
}
