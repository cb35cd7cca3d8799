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
	if addr.Port() != 0 {
		if err := portFree(addr, g.cfg.UDP.Enabled); err != nil {
			return err
		}
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

// portFree checks, before the loops bind, that no other socket holds
// addr's port. The loops' sockets share it through SO_REUSEPORT, and the
// kernel lets any socket of the same user that sets it too join them: a
// second edgemux started on a port already served (a copy run by hand
// beside the service, say) would bind without an error and take part of
// the new connections and datagrams, each process serving half of them
// with no word said. A probe bound without SO_REUSEPORT is refused when
// another socket listens on the port (TCP) or is bound to it (UDP), so
// the gateway refuses to start instead. SO_REUSEADDR lets the TCP probe
// bind over connections of an earlier run still in TIME_WAIT, as the
// listeners do. The probes close before the loops bind: another process
// could slip in between, a window of microseconds, against a mistake
// made by hand.
func portFree(addr netip.AddrPort, udp bool) error {
	if err := probeBind(addr, unix.SOCK_STREAM, true); err != nil {
		return fmt.Errorf("%w: another socket listens on %v (another edgemux?); this gateway's sockets would share the port and take part of its connections", err, addr)
	}
	if !udp {
		return nil
	}
	if err := probeBind(addr, unix.SOCK_DGRAM, false); err != nil {
		return fmt.Errorf("%w: another socket is bound to udp %v; this gateway's sockets would share the port and take part of its datagrams (udp.enabled: false leaves UDP out)", err, addr)
	}
	return nil
}

// probeBind binds a socket of typ to addr without SO_REUSEPORT, and
// closes it.
func probeBind(addr netip.AddrPort, typ int, reuseAddr bool) error {
	fd, err := unix.Socket(familyOf(addr), typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return sysErr("socket", err)
	}
	defer unix.Close(fd)
	if reuseAddr {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return sysErr("setsockopt SO_REUSEADDR", err)
		}
	}
	return sysErr("bind", unix.Bind(fd, sockaddr(addr)))
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
