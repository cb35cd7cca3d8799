package gateway

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Receive moderation (udp.receive_delay). Without it, a socket read dry
// goes back to epoll and its next datagram wakes the loop: at a steady
// moderate rate (the keepalives of a large idle fleet: thousands a
// second, spread evenly) every datagram comes alone, and pays alone for
// the loop's wakeup, a recvmmsg, a ring entry, the worker's wakeup and
// its handler call. With it, the socket is registered EPOLLONESHOT: the
// first datagram after a quiet spell wakes the loop and is handed on at
// once, as before, but the socket then stays out of epoll and the loop
// reads it again at the next multiple of the delay (counted from the
// gateway's start, so every loop reads at the same instants and a worker
// fed by several loops wakes once for all of them), handing on whatever
// came meanwhile in one batch. A read that finds nothing puts the socket
// back in epoll. A datagram therefore waits at most the delay, and only
// while others keep coming (TestReceiveModerationBatches).

// epollEvents is the socket's epoll registration: edge-triggered, and
// one-shot when moderated.
func (u *udpSocket) epollEvents() uint32 {
	if u.delay > 0 {
		return unix.EPOLLIN | unix.EPOLLET | unix.EPOLLONESHOT
	}
	return unix.EPOLLIN | unix.EPOLLET
}

// udpReadable handles the socket's epoll event: drain it, and when
// moderated leave it out of epoll (the one-shot event disarmed it) until
// the next poll.
func (l *loop) udpReadable() {
	l.drainUDP()
	if u := l.udp; u.delay > 0 {
		u.polled.Store(true)
		u.pollAt = l.nextUDPPoll(time.Now())
	}
}

// udpPoll reads a polled socket when its time has come: more datagrams
// keep it polled until the next multiple of the delay; none put it back
// in epoll. Each turn of the loop.
func (l *loop) udpPoll() {
	u := l.udp
	if u == nil || !u.polled.Load() || l.udpAgain {
		return
	}
	now := time.Now()
	if now.Before(u.pollAt) {
		return
	}
	if l.drainUDP() > 0 || l.udpAgain {
		u.pollAt = l.nextUDPPoll(now)
		return
	}
	// Dry: re-arm. EPOLL_CTL_MOD looks at the socket as it is, so a
	// datagram that came after the read above raises the event at once.
	if err := u.rearm(l.epfd); err != nil {
		l.g.log.Warn("udp", "loop", l.idx, "err", err)
		u.pollAt = l.nextUDPPoll(now) // poll on; the next try may re-arm
		return
	}
	u.polled.Store(false)
}

// nextUDPPoll is the first multiple of the delay since the gateway's
// start after now.
func (l *loop) nextUDPPoll(now time.Time) time.Time {
	d := l.udp.delay
	k := now.Sub(l.g.start)/d + 1
	return l.g.start.Add(k * d)
}

// udpPollTimeout shortens the loop's epoll timeout (ms) to the next poll
// of a polled socket, rounded up: waking before it would only wait again.
func (l *loop) udpPollTimeout(timeout int) int {
	u := l.udp
	if u == nil || !u.polled.Load() {
		return timeout
	}
	wait := time.Until(u.pollAt)
	if wait <= 0 {
		return 0
	}
	return min(timeout, int((wait+time.Millisecond-1)/time.Millisecond))
}

// rearm puts the polled socket back in epoll (EPOLL_CTL_MOD, as loop.ctl
// registers it: fd, generation 0), as a raw call like the socket's reads
// (dgramSyscall): announced, it woke the runtime's sysmon at the end of
// every quiet spell.
func (u *udpSocket) rearm(epfd int) error {
	ev := unix.EpollEvent{Events: u.epollEvents(), Fd: int32(u.fd)}
	_, _, e := dgramSyscall(unix.SYS_EPOLL_CTL, uintptr(epfd), unix.EPOLL_CTL_MOD, uintptr(u.fd),
		uintptr(unsafe.Pointer(&ev)), 0, 0)
	if e != 0 {
		return sysErr("epoll_ctl", e)
	}
	return nil
}
