package gateway

import (
	"errors"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// listenTCP opens a non-blocking SO_REUSEPORT listening socket. Each loop
// has its own, so the kernel spreads new connections across loops.
func listenTCP(addr netip.AddrPort) (int, netip.AddrPort, error) {
	fd, err := unix.Socket(familyOf(addr), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, addr, sysErr("socket", err)
	}
	fail := func(call string, err error) (int, netip.AddrPort, error) {
		unix.Close(fd)
		return -1, addr, sysErr(call, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt SO_REUSEADDR", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return fail("setsockopt SO_REUSEPORT", err)
	}
	// Accepted sockets inherit TCP_NODELAY from the listener on Linux: set
	// once here, it costs no system call per connection. It must hold
	// before the first peek, or Nagle on the peer's side of a
	// request/response exchange can stall classification (seed 002, bug 2).
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fail("setsockopt TCP_NODELAY", err)
	}
	if err := unix.Bind(fd, sockaddr(addr)); err != nil {
		return fail("bind", err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		return fail("listen", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	return fd, addrPort(sa), nil
}

// familyOf is the socket family for addr: IPv4 for an IPv4 or
// IPv4-mapped address, IPv6 otherwise.
func familyOf(addr netip.AddrPort) int {
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func sockaddr(a netip.AddrPort) unix.Sockaddr {
	if a.Addr().Is4() || a.Addr().Is4In6() {
		return &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().Unmap().As4()}
	}
	return &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16()}
}

func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

func osSyscallError(call string, err error) error { return os.NewSyscallError(call, err) }

// accept takes new connections, up to its burst per wakeup; the listener
// is level-triggered, so what is left is reported again by the next
// epoll_wait. The burst adapts so that a trickle of connections costs one
// accept4 each, not one plus one that meets EAGAIN: it starts at one,
// doubles (up to acceptsPerEdge) when the listener is ready again in the
// very next loop turn after a wakeup used its burst up (connections are
// queueing: a flood), and falls back to one when accept4 meets EAGAIN. A
// flood thus takes its connections in batches after a few turns.
func (l *loop) accept(rt *runtimeConfig) {
	if l.lfd < 0 || l.paused {
		return
	}
	burst := max(l.acceptBurst, 1)
	for range burst {
		fd, peer, err := acceptFD(l.lfd, &l.peer, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if testHookAccept != nil {
			testHookAccept(err)
		}
		switch {
		case err == nil:
			l.admit(rt, fd, peer)
		case errors.Is(err, unix.EAGAIN):
			l.acceptBurst = 1
			return
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
			continue
		case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
			l.exhausted(rt)
			return
		default:
			l.g.log.Warn("accept", "loop", l.idx, "err", err)
			return
		}
	}
	if l.acceptTurn+1 == l.turn {
		l.acceptBurst = min(2*burst, acceptsPerEdge)
	}
	l.acceptTurn = l.turn
}

// testHookAccept sees every accept4's error (nil: a connection); tests
// count the calls with it.
var testHookAccept func(err error)

// exhausted handles EMFILE/ENFILE: give up the reserved fd, accept the
// waiting connection and close it at once (the client sees a clean close
// instead of hanging in the backlog), take the reserve back, count it and
// pause accepting briefly. The loop never spins on a full fd table.
func (l *loop) exhausted(rt *runtimeConfig) {
	l.g.metrics.emfile.Inc()
	if l.spare >= 0 {
		unix.Close(l.spare)
		l.spare = -1
		if fd, _, err := unix.Accept4(l.lfd, unix.SOCK_CLOEXEC); err == nil {
			unix.Close(fd)
		}
		l.spare, _ = unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	// Level-triggered: leave the listener out of epoll while paused, or
	// the pending backlog would wake the loop in a busy circle.
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, l.lfd, nil)
	l.paused = true
	l.pauseTo = time.Now().Add(rt.limits.EMFILEPause)
	l.g.log.Warn("file descriptors exhausted; pausing accept", "loop", l.idx, "pause", rt.limits.EMFILEPause)
}

// admit applies bans and connection caps, then registers the connection
// and arms its sniff deadline.
func (l *loop) admit(rt *runtimeConfig, fd int, peer netip.AddrPort) {
	ip := peer.Addr()
	if l.g.book.Banned(ip) {
		l.g.book.CountRefused()
		unix.Close(fd)
		return
	}
	lim := &rt.limits
	if reason := l.g.limits.admit(ip, lim, l.g.reg.Len()+int(l.g.fwd.active.Load())); reason != "" {
		l.g.metrics.refused.WithLabelValues(reason).Inc()
		unix.Close(fd)
		return
	}
	// TCP_NODELAY comes from the listener (listenTCP).
	gen, err := l.g.reg.Open(fd, peer, l.idx, l.g.nowMs())
	if err != nil {
		l.g.limits.doneSniffing(ip)
		l.g.limits.closed(ip)
		l.g.metrics.refused.WithLabelValues("registry").Inc()
		if l.g.warnedRegistry.CompareAndSwap(false, true) { // once: a flood must not flood the log
			l.g.log.Warn("connection refused: its fd is beyond the registry (sized from limits.max_conns); counted in edgemux_refused_total{reason=\"registry\"}", "fd", fd, "slots", l.g.reg.Size(), "err", err)
		}
		unix.Close(fd)
		return
	}
	if err := l.ctl(unix.EPOLL_CTL_ADD, fd, gen, epollConn); err != nil {
		l.closeUnclassified(fd, gen)
		return
	}
	l.g.metrics.accepted.Inc()
	due := uint64(time.Since(l.g.start)/loopTick) + uint64((rt.deadline+loopTick-1)/loopTick)
	l.wheel.add(uint64(fd)<<32|uint64(gen), due, timerSniff)
}

// resume puts the listener back after an EMFILE pause.
func (l *loop) resume() {
	if !l.paused || time.Now().Before(l.pauseTo) || l.lfd < 0 {
		return
	}
	if err := l.ctl(unix.EPOLL_CTL_ADD, l.lfd, 0, unix.EPOLLIN); err == nil {
		l.paused = false
	}
}
