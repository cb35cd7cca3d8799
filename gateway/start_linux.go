package gateway

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/route"
)

// bindAttempts is how many ports startLoops tries when the configuration
// asks for any (port 0).
const bindAttempts = 16

// startLoops binds the shared port once per loop (SO_REUSEPORT) and starts
// the loops. With port 0 the first socket picks the port and the others
// join it; the kernel picks a port free for TCP, and the same number may
// be taken for UDP (by another program, or a test beside this one), so
// then the gateway lets go of everything and tries another.
func (g *Gateway) startLoops() error {
	addr, err := netip.ParseAddrPort(g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("gateway: listen %q: %w", g.cfg.Listen, err)
	}
	for attempt := 1; ; attempt++ {
		err := g.bind(addr)
		if err == nil {
			break
		}
		if addr.Port() != 0 || attempt == bindAttempts || !errors.Is(err, unix.EADDRINUSE) {
			return err
		}
		g.log.Debug("port taken for UDP, trying another", "port", g.addr.Port(), "err", err)
		g.unbind()
	}
	for _, l := range g.loops {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			l.run()
		}()
	}
	return nil
}

// bind makes the loops and their sockets on addr.
func (g *Gateway) bind(addr netip.AddrPort) error {
	n := defaultLoops(g.cfg.Loops)
	inline := g.cfg.Dispatch.Policy == "inline"
	for i := range n {
		l := newLoop(g, i)
		g.loops = append(g.loops, l)
		bound, err := l.open(addr)
		if err != nil {
			return err
		}
		addr = bound
		if err := g.connect(l); err != nil {
			return err
		}
		if inline {
			for _, p := range g.pools {
				w := newWorker(g, p, -1, -1, 0)
				w.rbuf = make([]byte, readBufSize)
				w.wake = l.wakeInline
				l.inline = append(l.inline, w)
			}
		}
	}
	g.addr = addr
	if g.udpBindFails > 0 { // a test's stand-in for a port taken for UDP
		g.udpBindFails--
		return fmt.Errorf("gateway: bind udp %v: %w", addr, unix.EADDRINUSE)
	}
	return g.startUDP(addr)
}

// unbind closes what a failed bind opened; nothing runs yet.
func (g *Gateway) unbind() {
	for _, l := range g.loops {
		l.closeFDs()
		l.closeEpoll()
	}
	for _, u := range g.udp {
		u.close()
	}
	g.loops, g.udp = nil, nil
}

// connect gives loop l one ring to every worker: an SPSC pair in which l
// pushes and the worker pops.
func (g *Gateway) connect(l *loop) error {
	for wi, w := range g.workers {
		r, err := route.NewRing(g.cfg.Dispatch.RingSize)
		if err != nil {
			return err
		}
		l.rings[wi] = r
		w.rings[l.idx] = r
	}
	return nil
}

func (g *Gateway) startWorkers() {
	if g.cfg.Dispatch.Policy == "inline" {
		return // the loops run them
	}
	for _, w := range g.workers {
		w.start()
	}
}
