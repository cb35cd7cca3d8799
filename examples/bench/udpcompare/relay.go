package main

// The relay between clients and server in the telemetry row: lossy.Relay,
// the protocols/rudp/lossy model (seeded Bernoulli loss, delay) on the
// wall clock, in process, over real UDP sockets, without rebinding:
// clients send to its listening socket; each client gets its own upstream
// socket, so the server sees one source address per client socket, as it
// would see devices. The network counts the bytes each way.

import (
	"context"
	"net"
	"net/netip"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

type relay struct {
	listen *net.UDPConn
	r      *lossy.Relay
	cancel context.CancelFunc
	done   chan struct{}
}

// startRelay relays to upstream with cfg's impairments until close.
func startRelay(upstream netip.AddrPort, cfg lossy.Config) (*relay, error) {
	listen, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	listen.SetReadBuffer(4 << 20)
	listen.SetWriteBuffer(4 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	rl := &relay{listen: listen, r: lossy.NewRelay(listen, upstream, cfg, 0), cancel: cancel, done: make(chan struct{})}
	go func() { rl.r.Run(ctx); close(rl.done) }()
	return rl, nil
}

func (r *relay) addr() netip.AddrPort { return r.listen.LocalAddr().(*net.UDPAddr).AddrPort() }

// stats is the network's byte and datagram counts so far.
func (r *relay) stats() lossy.Stats { return r.r.Stats() }

// close stops the relay and lets go of its sockets.
func (r *relay) close() {
	r.cancel()
	r.listen.Close()
	<-r.done
}
