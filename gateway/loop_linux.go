package gateway

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/registry/offheap"
	"github.com/edgemux/edgemux/route"
	"github.com/edgemux/edgemux/sniff"
)

// Loop tuning.
const (
	loopTick        = 100 * time.Millisecond // sniff-deadline resolution
	sniffWheelSlots = 1024                   // ticks per turn: 102 s
	maxEvents       = 256                    // epoll_wait batch
	acceptsPerEdge  = 256                    // most accepts per wakeup before the loop serves other events
)

// Commands posted to a loop through its eventfd.
const (
	loopCmdStopAccept uint32 = 1 << iota
	loopCmdStop
	loopCmdWakeInline
	loopCmdUDPStep // a worker got busy: cut a long receive step short (udpPoll)
)

const epollConn = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET

// loop is one epoll instance with its own SO_REUSEPORT listening socket:
// it accepts, keeps sniff deadlines on its timing wheel, classifies new
// connections from a MSG_PEEK of their first bytes, and routes them.
type loop struct {
	g           *Gateway
	idx         int
	epfd        int
	lfd         int    // listening socket; -1 once accepting stopped
	efd         int    // eventfd that wakes the loop
	spare       int    // reserved fd for EMFILE
	acceptBurst int    // accepts per listener wakeup; see accept
	acceptTurn  uint64 // the turn whose accept used its burst up
	turn        uint64 // epoll_wait calls so far
	wheel       *wheel
	peek        []byte
	peer        acceptAddr // accept4 writes the new connection's address here
	events      []unix.EpollEvent
	park        *epollPark              // waits on the runtime's poller; nil: blocking epoll_wait (pin_cpus)
	rings       []*route.Ring           // by global worker index
	backlog     [][]uint64              // events that found their ring full, by worker
	inline      []*worker               // by pool index, for the inline policy
	udp         *udpSocket              // this loop's share of the UDP port, or nil
	udpAgain    bool                    // the UDP socket was not drained to EAGAIN
	dgRoutes    [numClasses]*dgramRoute // where each datagram class goes; nil: dropped
	dirty       []*dgramLane            // lanes with a batch to publish
	ahead       int                     // batches a busy worker may hold before the loop holds back small ones
	dgWait      time.Duration           // until the inline workers' next datagram Tick
	routePanics uint64                  // datagram handlers' Route panics on this loop
	woke        bool                    // a worker was unparked since the last epoll_wait
	awake       atomic.Bool             // the loop is in its turn: its inline workers need no eventfd wake (wakeInline)
	toWake      []int                   // workers given events in this turn, to wake once at its end
	marked      []bool                  // by global worker index: in toWake already
	expireFn    func(timer)             // l.expire as a value made once: no closure per iteration
	st          stageClock              // stage timestamps (stages.go)

	cmdMu   sync.Mutex
	cmds    uint32
	paused  bool
	pauseTo time.Time // accepting paused after EMFILE until then
}

func newLoop(g *Gateway, idx int) *loop {
	l := &loop{g: g, idx: idx, epfd: -1, lfd: -1, efd: -1, spare: -1, st: newStageClock(g)}
	l.rings = make([]*route.Ring, len(g.workers))
	l.backlog = make([][]uint64, len(g.workers))
	l.marked = make([]bool, len(g.workers))
	l.toWake = make([]int, 0, len(g.workers))
	return l
}

// open creates the epoll instance, the eventfd and the listening socket.
func (l *loop) open(addr netip.AddrPort) (netip.AddrPort, error) {
	var err error
	if l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return addr, sysErr("epoll_create1", err)
	}
	if l.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return addr, sysErr("eventfd", err)
	}
	if err = l.ctl(unix.EPOLL_CTL_ADD, l.efd, 0, unix.EPOLLIN); err != nil {
		return addr, err
	}
	if l.lfd, addr, err = listenTCP(addr); err != nil {
		return addr, err
	}
	if err = l.ctl(unix.EPOLL_CTL_ADD, l.lfd, 0, unix.EPOLLIN); err != nil {
		return addr, err
	}
	l.spare, _ = unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	l.wheel = newWheel(sniffWheelSlots, uint64(time.Since(l.g.start)/loopTick))
	l.expireFn = l.expire
	l.peek = offheap.Bytes(l, peekCap+1) // pointer-free and as long-lived as l: 64 KiB the heap's goal need not double
	l.events = make([]unix.EpollEvent, maxEvents)
	if !l.g.cfg.PinCPUs {
		if l.park, err = newEpollPark(l.epfd, l.events); err != nil {
			return addr, err
		}
	}
	return addr, nil
}

func (l *loop) ctl(op, fd int, gen uint32, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd), Pad: int32(gen)}
	return sysErr("epoll_ctl", unix.EpollCtl(l.epfd, op, fd, &ev))
}

func (l *loop) udpFD() int {
	if l.udp == nil {
		return -1
	}
	return l.udp.fd
}

// openUDP adds this loop's UDP socket on the shared port.
func (l *loop) openUDP(addr netip.AddrPort) (*udpSocket, error) {
	c := l.g.cfg.UDP
	u, err := openUDP(addr, udpOptions{batch: c.Batch, maxDatagram: c.MaxDatagram,
		readBuffer: c.ReadBuffer, writeBuffer: c.WriteBuffer,
		receiveDelay: c.ReceiveDelay, receiveDelayIdle: c.ReceiveDelayIdle})
	if err != nil {
		return nil, err
	}
	l.udp = u
	return u, l.ctl(unix.EPOLL_CTL_ADD, u.fd, 0, u.epollEvents())
}

// post sets command bits and wakes the loop. Safe from any goroutine.
func (l *loop) post(cmd uint32) {
	if testHookPost != nil {
		testHookPost(cmd)
	}
	l.cmdMu.Lock()
	l.cmds |= cmd
	l.cmdMu.Unlock()
	if l.efd >= 0 {
		var one = [8]byte{1}
		unix.Write(l.efd, one[:])
	}
}

// testHookPost sees every command posted to a loop; tests count the
// eventfd wakes with it.
var testHookPost func(cmd uint32)

func (l *loop) run() {
	defer l.closeFDs()
	if l.g.cfg.PinCPUs {
		runtime.LockOSThread()
		pinToCPU(l.idx)
	}
	l.openInlineDatagrams()
	for {
		timeout := int(loopTick / time.Millisecond)
		if l.quiet() {
			timeout = int(quietWait / time.Millisecond)
		}
		if l.dgWait > 0 {
			// Round up: epoll_wait counts whole milliseconds, and waking
			// before a datagram handler's deadline would only wait again.
			timeout = min(timeout, int((l.dgWait+time.Millisecond-1)/time.Millisecond))
		}
		if l.hasBacklog() || l.udpAgain || len(l.dirty) > 0 {
			timeout = 1
		}
		timeout = l.udpPollTimeout(timeout)
		if l.woke {
			// A channel wake puts the worker on this loop's P; yield once
			// so it runs now rather than when the runtime steals it back
			// (route/wake_bench_test.go: p50 0.9 us instead of 12-50 us).
			l.woke = false
			runtime.Gosched()
		}
		timeout = l.sleepy(timeout)
		n, err := l.wait(timeout)
		l.awake.Store(true)
		l.turn++
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.g.log.Error("epoll_wait", "loop", l.idx, "err", err)
			return
		}
		rt := l.g.rt.Load()
		sample := l.st.batch(n)
		for i := 0; i < n; i++ {
			ev := &l.events[i]
			fd := int(ev.Fd)
			switch fd {
			case l.efd:
				if l.commands() {
					return
				}
			case l.lfd:
				l.accept(rt)
			case l.udpFD():
				l.udpReadable()
			default:
				if i == sample {
					l.st.begin()
					sample = l.st.next(i, n)
				}
				l.event(rt, fd, uint32(ev.Pad), ev.Events)
				l.st.on = false
			}
		}
		l.wakeMarked()
		if l.udpAgain {
			l.udpAgain = false
			l.drainUDP()
		}
		l.udpPoll()
		if len(l.dirty) > 0 {
			l.publishDatagrams(l.ahead)
		}
		l.flushBacklog()
		l.resume()
		now := uint64(time.Since(l.g.start) / loopTick)
		l.wheel.advance(now, l.expireFn)
		l.wakeMarked() // connections whose sniff deadline handed them over
		l.runInline()
	}
}

// quiet reports whether the loop has no deadline of its own: no sniff
// deadline on its wheel, no accept pause, no worker of its own to tick.
// It then sleeps until an event or quietWait, not every loopTick.
func (l *loop) quiet() bool {
	return l.wheel.len() == 0 && !l.paused && len(l.inline) == 0
}

// wait returns the epoll events ready now, or waits up to timeoutMs for
// some: parked on the runtime's poller (loopwait_linux.go), or in
// epoll_wait for a loop pinned to its core.
func (l *loop) wait(timeoutMs int) (int, error) {
	if l.park != nil {
		return l.park.wait(l.epfd, timeoutMs)
	}
	return unix.EpollWait(l.epfd, l.events, timeoutMs)
}

// wakeInline is an inline worker's wake: a post to the loop's eventfd,
// unless the loop is in its turn. A bus delivery to a connection of the
// loop's own (a private PUB echoed to its publisher) comes from the loop's
// goroutine itself, mid-turn: the eventfd write cost a write(2) per
// request, the next epoll_wait returned at once for it, and its read
// another read(2) (echocompare 19000/50 64 B: 1.9 writes per request
// under inline against 1.0 under entropy). Any goroutine.
func (l *loop) wakeInline() bool {
	if !l.awake.Load() {
		l.post(loopCmdWakeInline)
	}
	return false
}

// sleepy ends the turn: from here on an inline worker's wake posts to the
// eventfd. Work that came while no wake was posted is looked at after the
// store (Dekker's order: a waker that saw awake set had queued its work
// before the store), and then the loop must not sleep: the wait is
// cut to a poll.
func (l *loop) sleepy(timeoutMs int) int {
	l.awake.Store(false)
	for _, w := range l.inline {
		if w.ready() {
			return 0
		}
	}
	return timeoutMs
}

// runInline runs the loop's own workers under the inline policy: what
// their connections queued, their timers, and their datagram handlers'
// Ticks (the loop's next epoll_wait ends in time for the earliest).
func (l *loop) runInline() {
	if len(l.inline) == 0 {
		return
	}
	now := time.Now()
	l.dgWait = 0
	for _, w := range l.inline {
		w.poll()
		w.tick(uint64(now.Sub(l.g.start) / workerTick))
		if w.dg != nil {
			wait := w.dg.tick(now)
			if l.dgWait == 0 || wait < l.dgWait {
				l.dgWait = max(wait, time.Microsecond)
			}
		}
	}
}

// commands handles posted commands; it reports whether the loop must end.
func (l *loop) commands() bool {
	var buf [8]byte
	unix.Read(l.efd, buf[:])
	l.cmdMu.Lock()
	cmds := l.cmds
	l.cmds = 0
	l.cmdMu.Unlock()
	if cmds&(loopCmdStopAccept|loopCmdStop) != 0 && l.lfd >= 0 {
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, l.lfd, nil)
		unix.Close(l.lfd)
		l.lfd = -1
		l.closeSniffing()
	}
	return cmds&loopCmdStop != 0
}

// event routes one epoll event for a connection.
func (l *loop) event(rt *runtimeConfig, fd int, gen uint32, events uint32) {
	s := l.g.reg.Lookup(fd, gen)
	if s == nil {
		return
	}
	st := s.State()
	// Look at the generation again after the state: a worker may have
	// closed the connection meanwhile and another loop reopened the fd;
	// its Retire (gen++) comes before the reopen, so this catches it.
	if s.Gen() != gen {
		l.g.reg.CountStale()
		return
	}
	if l.st.on {
		l.st.mark(stLookup)
	}
	switch st {
	case registry.Sniffing:
		// A peer that hung up sends nothing more: settle what it sent
		// now, as the deadline would, instead of holding it till then.
		hup := events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0
		if hup || events&unix.EPOLLIN != 0 {
			l.sniff(rt, fd, gen, s, hup)
		}
	case registry.Active, registry.Quarantined:
		var bits uint32
		if events&unix.EPOLLIN != 0 {
			bits |= registry.EvRead
		}
		if events&unix.EPOLLOUT != 0 && s.WantsWrite() {
			bits |= registry.EvWrite
		}
		if events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			bits |= registry.EvHup
		}
		if bits != 0 {
			l.deliver(fd, gen, s, bits)
		}
	}
}

// deliver posts bits for the connection's worker and queues it on the
// worker's ring unless it is queued already (registry.Post): a ring holds
// at most one event per live fd.
func (l *loop) deliver(fd int, gen uint32, s *registry.Slot, bits uint32) {
	if l.st.on {
		bits |= evSampled
		l.g.stageAt[fd].Store(l.st.now())
	}
	if !l.g.reg.Post(fd, gen, bits) {
		return
	}
	id := connEntry(fd, gen)
	wi := s.Worker()
	if wi >= len(l.rings) { // inline: wi encodes the pool
		w := l.inline[wi-len(l.rings)]
		if l.st.on {
			l.st.mark(stEnqueue)
		}
		w.handle(id)
		return
	}
	if len(l.backlog[wi]) > 0 || !l.rings[wi].Push(id) {
		l.backlog[wi] = append(l.backlog[wi], id)
		l.g.metrics.ringFull.Inc()
	}
	if l.st.on {
		l.st.mark(stEnqueue)
	}
	if !l.marked[wi] {
		l.marked[wi] = true
		l.toWake = append(l.toWake, wi)
	}
}

// wakeMarked wakes, once each, the workers given events since the last
// call: one wake per worker per batch of epoll events, not one per event.
// A worker woken at the first event of a batch would take it, find its
// ring empty, park, and be woken again by the next; woken at the end it
// takes the whole batch in one go. The events wait at most for the rest
// of the batch (maxEvents events) to be routed.
func (l *loop) wakeMarked() {
	for _, wi := range l.toWake {
		l.marked[wi] = false
		w := l.g.workers[wi]
		if w.lend() {
			continue
		}
		if w.wake() {
			l.woke = true
		}
	}
	l.toWake = l.toWake[:0]
}

func (l *loop) hasBacklog() bool {
	for _, b := range l.backlog {
		if len(b) > 0 {
			return true
		}
	}
	return false
}

func (l *loop) flushBacklog() {
	for wi, b := range l.backlog {
		if len(b) == 0 {
			continue
		}
		n := 0
		for n < len(b) && l.rings[wi].Push(b[n]) {
			n++
		}
		l.backlog[wi] = append(b[:0], b[n:]...)
		l.g.workers[wi].wake()
	}
}

// closeFDs releases the loop's own descriptors when it ends, but for the
// epoll instance: workers may still close connections registered in it,
// so the gateway closes it once every goroutine is done (closeEpoll).
func (l *loop) closeFDs() {
	l.closeSniffing()
	for _, w := range l.inline {
		w.stopAll()
		if w.dg != nil {
			w.dg.close()
		}
	}
	// The UDP socket stays open: workers may still send from it. The
	// gateway closes it once every goroutine is done (release).
	for _, fd := range []int{l.lfd, l.efd, l.spare} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	l.lfd, l.efd, l.spare = -1, -1, -1
}

// closeEpoll closes the epoll instance; only after the loop and every
// worker have ended.
func (l *loop) closeEpoll() {
	if l.park != nil {
		l.park.close() // closes epfd
		l.park, l.epfd = nil, -1
	}
	if l.epfd >= 0 {
		unix.Close(l.epfd)
		l.epfd = -1
	}
}

// closeSniffing closes the connections this loop is still classifying.
func (l *loop) closeSniffing() {
	for fd := range l.g.reg.Used() {
		s := l.g.reg.Slot(fd)
		if s.State() == registry.Sniffing && s.Loop() == l.idx {
			l.closeUnclassified(fd, s.Gen())
		}
	}
}

func (l *loop) closeUnclassified(fd int, gen uint32) { l.g.closeConn(fd, gen) }

func sysErr(call string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("gateway: %w", osSyscallError(call, err))
}

// handOff gives a classified connection to its worker's ring.
func (l *loop) handOff(fd int, gen uint32, s *registry.Slot, p *pool, pr sniff.Proto, reason protocols.Reason, probe bool) {
	wi, seed := p.pick(pr, s.Peer().Addr())
	global := 0
	if wi < 0 {
		global = len(l.rings) + l.inlineIndex(p)
	} else {
		global = p.workers[wi].idx
	}
	st := registry.Active
	if p.quarantine {
		st = registry.Quarantined
	}
	if err := l.g.reg.Classify(fd, gen, uint8(pr), global, st); err != nil {
		l.g.log.Error("registry", "fd", fd, "err", err)
		l.closeUnclassified(fd, gen)
		return
	}
	if l.st.on {
		l.st.mark(stRoute)
	}
	l.g.limits.doneSniffing(s.Peer().Addr())
	bits := registry.EvOpen | registry.EvRead | uint32(reasonIndex(reason))<<8 | seed
	if probe {
		bits |= registry.EvProbe
	}
	l.deliver(fd, gen, s, bits)
}
