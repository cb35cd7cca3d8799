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
//
// The idle step (udp.receive_delay_idle). At 100,000 idle sessions the
// keepalives come steadily, a few per 2 ms step on each loop, and most of
// the gateway's CPU went to wakeups, not datagrams: each step woke every
// loop and each loop's batch the workers it feeds (1,000-2,000 goroutine
// wakeups a second, about 8 us each on the 2-core VM, against 1.5-2 us a
// datagram). While every datagram worker says its handlers are idle
// (dgBusy == 0: rudp's sessions carried no data and took no handshake
// for a second; keepalive answers wait for a 16 ms boundary anyway), the
// loops read every receive_delay_idle instead, the same datagrams in
// fewer, fuller batches. Data makes a worker busy at the Tick after the
// batch that brought it, and the first busy worker wakes every loop
// that is waiting out a long step (wakeLongSteps): its next read is at
// the next short step, so only the datagrams that came with the first
// data waited the long one, not the data's next datagrams as well
// (TestIdleReceiveStep, TestBusyCutsIdleStep). The long step is also refused
// when what the last read found, at that rate, would fill more than a
// quarter of the socket's receive buffer in one step: a large fleet
// must not overflow it.

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
	read := l.drainUDP()
	if u := l.udp; u.delay > 0 {
		u.polled.Store(true)
		// What came with the wakeup came in no step: count it as if it
		// took the short one (the long step's rate check errs short).
		l.scheduleUDPPoll(time.Now(), l.udpStep(read, u.delay))
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
	if now.Before(u.pollAt) && u.longStep.Load() && l.g.dgBusy.Load() > 0 {
		// A worker got busy while this loop waited out a long step
		// (wakeLongSteps woke it): read at the next short one, or at
		// the long one's if that comes first (a long step that is no
		// multiple of the short one).
		at := u.pollAt
		l.scheduleUDPPoll(now, u.delay)
		u.pollAt = minTime(u.pollAt, at)
		u.cutSteps.Add(1)
	}
	if now.Before(u.pollAt) {
		return
	}
	if read := l.drainUDP(); read > 0 || l.udpAgain {
		step := u.delay
		if !l.udpAgain {
			step = l.udpStep(read, u.step)
		}
		l.scheduleUDPPoll(now, step)
		return
	}
	// Dry: re-arm. EPOLL_CTL_MOD looks at the socket as it is, so a
	// datagram that came after the read above raises the event at once.
	if err := u.rearm(l.epfd); err != nil {
		l.g.log.Warn("udp", "loop", l.idx, "err", err)
		l.scheduleUDPPoll(now, u.delay) // poll on; the next try may re-arm
		return
	}
	u.polled.Store(false)
	u.longStep.Store(false)
}

// udpStep is how long the loop leaves its polled socket after a read
// that found read datagrams, which came over span: the idle step while
// every datagram worker is idle and a step of datagrams at that rate
// fits in idleBatch, the short one otherwise.
func (l *loop) udpStep(read int, span time.Duration) time.Duration {
	u := l.udp
	if u.idleDelay <= u.delay || l.g.dgBusy.Load() > 0 {
		return u.delay
	}
	if int64(read)*int64(u.idleDelay) > int64(u.idleBatch)*int64(max(span, u.delay)) {
		return u.delay
	}
	// Dekker's order with wakeLongSteps: the flag is up before dgBusy is
	// read again, and a worker counts itself busy before it reads the
	// flag, so either this loop sees the busy worker or the worker sees
	// the flag and wakes the loop.
	u.longStep.Store(true)
	if l.g.dgBusy.Load() > 0 {
		u.longStep.Store(false)
		return u.delay
	}
	return u.idleDelay
}

// wakeLongSteps wakes the loops that wait out a long step: the first
// worker to get busy calls it (dgramWorker.setBusy), and each loop's
// udpPoll then moves its next read to the next short step. Rare: a
// worker stays busy for a second after its last data (busyFor in rudp).
func (g *Gateway) wakeLongSteps() {
	for _, l := range g.loops {
		if u := l.udp; u != nil && u.longStep.Load() {
			l.post(loopCmdUDPStep)
		}
	}
}

// scheduleUDPPoll sets the next read of the polled socket to the first
// multiple of step since the gateway's start after now: every loop
// reads at the same instants, and the idle step's instants are among
// the short one's when it is a multiple of it.
func (l *loop) scheduleUDPPoll(now time.Time, step time.Duration) {
	u := l.udp
	if step == u.idleDelay && step != u.delay {
		u.idleSteps.Add(1)
	} else {
		u.longStep.Store(false)
	}
	u.step = step
	k := now.Sub(l.g.start)/step + 1
	u.pollAt = l.g.start.Add(k * step)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
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
