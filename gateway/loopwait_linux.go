package gateway

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epollPark lets a loop wait for its epoll instance on the Go runtime's
// own poller instead of in a blocking epoll_wait. An epoll fd is itself
// pollable (readable while it has events ready), so the runtime's epoll
// can watch it like a socket: the loop goroutine parks, no OS thread sits
// in a system call for it, and the loop, its workers and the runtime share
// the process's threads the way Go's net package does.
//
// Why: a loop blocked in epoll_wait holds an OS thread in a system call.
// The runtime's monitor takes its P away after 20 us and hands it to
// another thread when a worker is runnable, and the loop needs a P back
// when epoll_wait returns: on a core the gateway shares with nothing else
// (GOMAXPROCS 1) every request paid for thread hand-offs and futex wakes
// (echocompare 19000/50, 64 B, pinned: 75,000 context switches in 5 s
// against gnet's 29,000).
//
// Loops pinned to a core (pin_cpus) keep the blocking epoll_wait: their
// goroutine is locked to its thread, and parking a locked goroutine costs
// the thread hand-off this avoids.
type epollPark struct {
	f      *os.File
	rc     syscall.RawConn
	events []unix.EpollEvent
	n      int   // what the last try returned
	err    error // and its error
	tryFn  func(uintptr) bool
	due    time.Time // the read deadline set last (zero: none yet)
}

// newEpollPark registers epfd with the runtime's poller. The epoll fd is
// set non-blocking only so that os.NewFile registers it; epoll_wait
// itself goes by its timeout.
func newEpollPark(epfd int, events []unix.EpollEvent) (*epollPark, error) {
	if err := unix.SetNonblock(epfd, true); err != nil {
		return nil, sysErr("fcntl O_NONBLOCK", err)
	}
	f := os.NewFile(uintptr(epfd), "epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	p := &epollPark{f: f, rc: rc, events: events}
	p.tryFn = p.parkTry
	return p, nil
}

// try is one non-blocking epoll_wait; it reports whether the wait is over
// (events, or an error other than EINTR).
//
// The call is raw (the scheduler is not told of it), as a connection's
// reads and writes are (sysio_linux.go): with a timeout of 0 it never
// sleeps, and announced it let sysmon hand the loop's P away mid-call.
func (p *epollPark) try(fd uintptr) bool {
	p.n, p.err = 0, nil
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&p.events[0])),
		uintptr(len(p.events)), 0, 0, 0)
	switch {
	case e == 0:
		p.n = int(n)
	case e != unix.EINTR:
		p.err = e
	}
	return p.n > 0 || p.err != nil
}

// wait returns the events ready now, or parks the goroutine until some
// are or timeoutMs passes (0 events, nil error). A wait of 0 ms (the loop
// has work of its own queued) is one try and never parks.
//
// Every other wait goes through rc.Read, whose first try is the busy
// loop's one epoll_wait per turn. Before, wait tried once itself and
// called rc.Read only when that found nothing, and rc.Read tries again
// before it parks (it must: it first clears the readiness the runtime's
// poller may have noted for an event raised after an earlier try, so a
// park without a try after that clear could sleep through the event;
// TestEpollParkLosesNoWake). So every park cost two empty epoll_waits and
// a SetReadDeadline, besides the runtime's own epoll_wait and the try
// that finds the events; now it costs one, and the deadline is re-armed
// only when it is due too late or too soon (arm).
func (p *epollPark) wait(fd int, timeoutMs int) (int, error) {
	if timeoutMs <= 0 {
		p.try(uintptr(fd))
		return p.n, p.err
	}
	p.arm(time.Duration(timeoutMs) * time.Millisecond)
	err := p.rc.Read(p.tryFn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return p.n, p.err
}

// parkTry is rc.Read's try; testHookPark runs when it found nothing, so
// just before the park.
func (p *epollPark) parkTry(fd uintptr) bool {
	if p.try(fd) {
		return true
	}
	if testHookPark != nil {
		testHookPark()
	}
	return false
}

// arm keeps the read deadline between half the timeout and the whole
// timeout from now. A busy loop passes here every turn, and setting a
// deadline takes the runtime's timer locks: with this it does so about
// once per half timeout. A deadline due a little early only wakes the
// loop for a turn that finds nothing to do.
func (p *epollPark) arm(timeout time.Duration) {
	now := time.Now()
	due := now.Add(timeout)
	if p.due.After(due) || p.due.Before(now.Add(timeout/2)) {
		p.f.SetReadDeadline(due)
		p.due = due
	}
}

// testHookPark runs when a wait's try found nothing, just before the
// park; tests raise events in that window with it.
var testHookPark func()

// close closes the epoll fd through the runtime, which deregisters it.
func (p *epollPark) close() { p.f.Close() }
