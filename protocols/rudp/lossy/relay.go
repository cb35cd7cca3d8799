package lossy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// relay carries UDP datagrams between clients (on its listening socket)
// and one upstream server, through a Network on the wall clock.
// Each client gets its own upstream socket, so the server sees one source
// per client; a rebinding replaces that socket (a new source port), as a
// NAT does.
type Relay struct {
	listen   *net.UDPConn
	upstream netip.AddrPort
	net      *Network
	rebind   time.Duration
	mu       sync.Mutex                  // guards net and the maps: the readers and the loop share them
	mappings map[netip.AddrPort]*mapping // by outside address
	byClient map[netip.AddrPort]*mapping
	wake     chan struct{}
	readErr  chan error
}

// mapping is one client's way upstream.
type mapping struct {
	inside, outside netip.AddrPort
	conn            *net.UDPConn
	created         time.Time
}

// NewRelay relays between the clients of listen and upstream; rebind > 0
// gives each client a new source port toward upstream that often.
func NewRelay(listen *net.UDPConn, upstream netip.AddrPort, cfg Config, rebind time.Duration) *Relay {
	cfg.Server = upstream
	return &Relay{
		listen: listen, upstream: upstream, net: New(cfg), rebind: rebind,
		mappings: map[netip.AddrPort]*mapping{}, byClient: map[netip.AddrPort]*mapping{},
		wake: make(chan struct{}, 1), readErr: make(chan error, 1),
	}
}

// Run relays until ctx ends; the caller closes listen afterwards.
func (r *Relay) Run(ctx context.Context) error {
	go r.readClients()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer r.closeAll()
	for {
		r.mu.Lock()
		r.deliver(time.Now())
		next, ok := r.net.Next()
		r.mu.Unlock()
		wait := time.Hour
		if ok {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case err := <-r.readErr:
			return err
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// readClients reads the listening socket: datagrams going up.
func (r *Relay) readClients() {
	buf := make([]byte, 65536)
	for {
		n, from, err := r.listen.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.readErr <- err
			}
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		r.mu.Lock()
		if err := r.ensureMapping(from); err != nil {
			r.mu.Unlock()
			r.readErr <- err
			return
		}
		r.net.Send(from, r.upstream, buf[:n], time.Now())
		r.mu.Unlock()
		r.poke()
	}
}

// ensureMapping gives a client an upstream socket, a new one when its
// mapping is older than the rebinding period. r.mu is held.
func (r *Relay) ensureMapping(client netip.AddrPort) error {
	m := r.byClient[client]
	if m != nil && (r.rebind <= 0 || time.Since(m.created) < r.rebind) {
		return nil
	}
	if m != nil {
		m.conn.Close()
		delete(r.mappings, m.outside)
		r.net.Rebind(client)
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IP(r.upstream.Addr().AsSlice())})
	if err != nil {
		return err
	}
	m = &mapping{inside: client, outside: r.net.Outside(client), conn: conn, created: time.Now()}
	r.byClient[client], r.mappings[m.outside] = m, m
	go r.readUpstream(m)
	return nil
}

// readUpstream reads one client's upstream socket: datagrams going down.
func (r *Relay) readUpstream(m *mapping) {
	buf := make([]byte, 65536)
	for {
		n, _, err := m.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return // closed by a rebinding or at the end
		}
		r.mu.Lock()
		r.net.Send(r.upstream, m.outside, buf[:n], time.Now())
		r.mu.Unlock()
		r.poke()
	}
}

// deliver sends what the network delivers by now. r.mu is held.
func (r *Relay) deliver(now time.Time) {
	r.net.Deliver(now, func(from, to netip.AddrPort, b []byte) {
		if to == r.upstream {
			if m := r.mappings[from]; m != nil {
				m.conn.WriteToUDPAddrPort(b, r.upstream)
			}
			return
		}
		r.listen.WriteToUDPAddrPort(b, to)
	})
}

func (r *Relay) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Relay) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.mappings {
		m.conn.Close()
	}
}

// Stats returns the network's counters.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.net.Stats()
}

// Blackout drops everything between from and to, both ways.
func (r *Relay) Blackout(from, to time.Time) {
	r.mu.Lock()
	r.net.Blackout(from, to)
	r.mu.Unlock()
}

// SetImpairment changes one direction's impairment from now on.
func (r *Relay) SetImpairment(up bool, imp Impairment) {
	r.mu.Lock()
	r.net.SetImpairment(up, imp)
	r.mu.Unlock()
}

// Report is the byte and datagram counts, one line.
func (r *Relay) Report() string {
	r.mu.Lock()
	st := r.net.Stats()
	r.mu.Unlock()
	return fmt.Sprintf("up: %d sent %d delivered %d lost %d B; down: %d sent %d delivered %d lost %d B; nat drops %d",
		st.Up.Sent, st.Up.Delivered, st.Up.Lost, st.Up.BytesSent, st.Down.Sent, st.Down.Delivered, st.Down.Lost, st.Down.BytesSent, st.NATDrops)
}
