package main

// The relay between clients and server in the telemetry row: the
// protocols/rudp/lossy model (seeded Bernoulli loss, delay) run on the
// wall clock, in process, over real UDP sockets. It is examples/lossy's
// relay (a package main there, so not importable), without rebinding:
// clients send to its listening socket; each client gets its own upstream
// socket, so the server sees one source address per client socket, as it
// would see devices. The network counts the bytes each way.

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

type relay struct {
	listen   *net.UDPConn
	upstream netip.AddrPort
	mu       sync.Mutex // guards net and the maps
	net      *lossy.Network
	byClient map[netip.AddrPort]*net.UDPConn
	byUp     map[netip.AddrPort]*net.UDPConn // by the client's address as the network knows it
	wake     chan struct{}
	stop     chan struct{}
	wg       sync.WaitGroup
}

// startRelay relays to upstream with cfg's impairments until close.
func startRelay(upstream netip.AddrPort, cfg lossy.Config) (*relay, error) {
	listen, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	listen.SetReadBuffer(4 << 20)
	listen.SetWriteBuffer(4 << 20)
	cfg.Server = upstream
	r := &relay{listen: listen, upstream: upstream, net: lossy.New(cfg),
		byClient: map[netip.AddrPort]*net.UDPConn{}, byUp: map[netip.AddrPort]*net.UDPConn{},
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.readClients() }()
	go func() { defer r.wg.Done(); r.run() }()
	return r, nil
}

func (r *relay) addr() netip.AddrPort { return r.listen.LocalAddr().(*net.UDPAddr).AddrPort() }

// stats are the network's counters.
func (r *relay) stats() lossy.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.net.Stats()
}

func (r *relay) close() {
	close(r.stop)
	r.listen.Close()
	r.mu.Lock()
	for _, c := range r.byClient {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// run delivers what the network delivers, when it does.
func (r *relay) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		r.net.Deliver(time.Now(), r.write)
		next, ok := r.net.Next()
		r.mu.Unlock()
		wait := time.Hour
		if ok {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// write sends one delivered datagram on; r.mu is held.
func (r *relay) write(from, to netip.AddrPort, b []byte) {
	if to == r.upstream {
		if c := r.byUp[from]; c != nil {
			c.WriteToUDPAddrPort(b, r.upstream)
		}
		return
	}
	r.listen.WriteToUDPAddrPort(b, to)
}

// readClients reads the listening socket: datagrams going up.
func (r *relay) readClients() {
	buf := make([]byte, 65536)
	for {
		n, from, err := r.listen.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		r.mu.Lock()
		if r.byClient[from] == nil {
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				r.mu.Unlock()
				continue // dropped, as on a full NAT table
			}
			c.SetReadBuffer(4 << 20)
			c.SetWriteBuffer(4 << 20)
			r.byClient[from], r.byUp[r.net.Outside(from)] = c, c
			r.wg.Add(1)
			go func() { defer r.wg.Done(); r.readUpstream(c, from) }()
		}
		r.net.Send(from, r.upstream, buf[:n], time.Now())
		r.mu.Unlock()
		r.poke()
	}
}

// readUpstream reads one client's upstream socket: datagrams going down.
func (r *relay) readUpstream(c *net.UDPConn, client netip.AddrPort) {
	buf := make([]byte, 65536)
	for {
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				continue
			}
			return
		}
		r.mu.Lock()
		r.net.Send(r.upstream, r.net.Outside(client), buf[:n], time.Now())
		r.mu.Unlock()
		r.poke()
	}
}

func (r *relay) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
