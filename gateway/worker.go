package gateway

import (
	"errors"
	"fmt"
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

// Worker tuning that is not worth a config key.
const (
	readBufSize      = 64 << 10 // one read buffer per worker, shared by its connections
	readsPerEvent    = 16       // reads before a busy connection yields to the others
	sampleEvery      = 16       // a connection's events per timed one (a power of two: the modulo is a mask)
	eventsPerRing    = 256      // events taken from one ring before looking at the next
	workerTick       = 100 * time.Millisecond
	idleWheelBuckets = 4096 // ticks of workerTick: about 7 minutes per turn
	lendMaxEvents    = 4    // a loop runs a sleeping worker's turn itself only for this few events (lend)
)

// worker owns connections for life: it alone reads them, writes them and
// calls their sessions, so their state needs no locks. Loops send it events
// through one SPSC ring per loop; anything else (bus deliveries, drain
// requests) arrives through the inbox.
type worker struct {
	g     *Gateway
	pool  *pool
	idx   int // index among all workers
	local int // index within its pool
	rings []*route.Ring
	park  *route.Parker // where it sleeps; a loop may borrow its turn from it (lend)
	wake  func() bool   // how others wake it: park.Unpark, or the loop's eventfd when inline; true if it slept
	// readyFn is w.ready as a value made once: a method value made at
	// each Park would be a closure made on every idle turn.
	readyFn  func() bool
	queuedFn func() bool // w.queued, as readyFn
	// lendable: handlers cheap enough that a loop may run this worker's
	// turn itself (lend); set from the sampled cost, read by the loops.
	lendable  atomic.Bool
	slowConns int    // connections marked too slow to be lent (judgeSlow)
	struck    int    // placed connections with a slow sample last (judgeSlow), slowConns among them
	suspect   uint64 // the id of a connection not placed yet whose last sample was slow (judgeSlow); 0 none

	inboxMu sync.Mutex
	inbox   []uint64 // conn ids with a pending Notify
	inboxN  atomic.Int32
	taken   []uint64

	dg     *dgramWorker // its datagram side; nil unless udp.routes names its pool
	fds    fdTable      // by fd: its conns and their placements (fdtable.go)
	again  []*conn      // read budget ran out before EAGAIN
	wheel  *wheel
	rbuf   []byte
	iovecs []unix.Iovec // writev's scratch (conn.writeBuffered)
	ticks  uint64
	state  atomic.Uint32 // what others ask: workerRunning, workerDraining, workerStopped
	done   chan struct{}
	served atomic.Uint64

	// Placement (placement.go): what the worker learns for the dispatcher.
	busyNs atomic.Uint64 // wall time in poll turns that found work, measured per turn
	costNs uint32        // smoothed sampled handler time per event, all its connections

	// What the worker has acted on, its own: the drain began (its
	// connections were told, new ones are told at hand-over), and the
	// grace ended (everything closes now).
	draining bool
	stopping bool

	st        stageClock // stage timestamps (stages.go): the wake and the handler
	handlerNs int64      // the sampled event's time in Session.Data so far; -1: no call yet
}

const (
	workerRunning uint32 = iota
	workerDraining
	workerStopped
)

func newWorker(g *Gateway, p *pool, idx, local, loops int) *worker {
	w := &worker{
		g: g, pool: p, idx: idx, local: local,
		fds:   newFDTable(g.reg.Size()),
		wheel: newWheel(idleWheelBuckets, 0),
		done:  make(chan struct{}),
	}
	w.rbuf = offheap.Bytes(w, readBufSize) // pointer-free and as long-lived as w
	w.readyFn = w.ready
	w.queuedFn = w.queued
	w.st = newStageClock(g)
	pk := route.NewParker(g.cfg.Dispatch.Spin)
	w.park = pk
	w.wake = pk.Unpark
	w.rings = make([]*route.Ring, loops)
	if p.servesDatagrams() {
		w.dg = newDgramWorker(w, p.dgram, loops)
	}
	return w
}

func (w *worker) start() {
	w.g.wg.Add(1)
	go func() {
		defer w.g.wg.Done()
		defer close(w.done)
		if w.g.cfg.PinCPUs {
			runtime.LockOSThread()
			pinToCPU(w.idx + len(w.g.loops))
		}
		w.run()
	}()
}

func (w *worker) run() {
	if w.dg != nil {
		w.dg.open(w.local, len(w.pool.workers), newDgramOut(w.g, w.g.udp[w.idx%len(w.g.udp)]))
		defer w.dg.close()
	}
	last := time.Now()
	for {
		if w.state.Load() == workerStopped {
			w.stopAll()
			return
		}
		// The tick first: a worker back from a quiet sleep (parkTimeout)
		// stamps what it handles with the tick of now, not of before.
		now := time.Now()
		if now.Sub(last) >= workerTick {
			w.tick(uint64(now.Sub(w.g.start) / workerTick))
			last = now
		}
		busy := w.timedPoll(now)
		// Datagram handlers' timers (retransmissions) want about a
		// millisecond, not the 100 ms the connections' wheel steps by.
		timeout := w.parkTimeout(now)
		if !busy {
			w.park.Park(w.readyFn, timeout)
		}
	}
}

// ready tells the parker whether there is work; it must be cheap. A drain
// or stop request is work until the worker has acted on it: a draining
// worker parks like any other, woken by its rings, inbox and timers.
func (w *worker) ready() bool {
	if len(w.again) > 0 || w.hasInput() {
		return true
	}
	st := w.state.Load()
	return st == workerStopped || st == workerDraining && !w.draining
}

// queued is ready without what only the worker itself knows (its again
// list, whether it has acted on a drain): atomics only, so a loop that
// ran the worker's turn (lend) may ask it after giving the turn back,
// when the worker may be running again.
func (w *worker) queued() bool {
	return w.state.Load() != workerRunning || w.hasInput()
}

// hasInput reports what others queued for the worker: notifications in
// its inbox, datagrams, events in its rings. Atomics only.
func (w *worker) hasInput() bool {
	if w.inboxN.Load() > 0 {
		return true
	}
	if w.dg != nil && w.dg.woken.Load() {
		return true
	}
	for _, r := range w.rings {
		if r.Len() > 0 {
			return true
		}
	}
	return false
}

// lend runs the worker's turn on the calling loop's goroutine when the
// worker sleeps, its handlers are cheap and little is queued: a quiet
// gateway's request then costs no wake, no switch to the worker's
// goroutine and no spin before the worker sleeps again. It reports
// whether it did; if not, the caller wakes the worker as usual.
func (w *worker) lend() bool {
	// A draining or stopping worker runs on its own: its turn ends in
	// work only it does (stopAll), and Return would wake it anyway.
	if !w.lendable.Load() || w.state.Load() != workerRunning || w.depth() > lendMaxEvents {
		return false
	}
	if !w.park.Borrow() {
		return false
	}
	w.timedPoll(time.Now())
	// What only the worker may finish (a connection whose read budget
	// ran out) goes back to it, awake.
	w.park.Return(len(w.again) > 0, w.queuedFn)
	return true
}

// timedPoll is poll, counting a turn that found work in busyNs: its wall
// time since now, two clock reads a turn however many events it held.
// The worker's own turns and lent ones (lend) are counted alike.
func (w *worker) timedPoll(now time.Time) bool {
	busy := w.poll()
	if busy {
		w.busyNs.Add(uint64(time.Since(now)))
	}
	return busy
}

// poll handles what is waiting and reports whether it found anything.
func (w *worker) poll() bool {
	busy := false
	for li, r := range w.rings {
		// What the ring held when its turn began, not what arrives
		// meanwhile: two connections of one loop whose handlers take
		// milliseconds keep their ring non-empty (each one's next
		// message lands while the other is served), and a turn that
		// popped until empty served them back to back for 256 events
		// while the other loops' connections on this worker waited.
		for range min(r.Len(), eventsPerRing) {
			id, ok := r.Pop()
			if !ok {
				break
			}
			busy = true
			if isBatch(id) {
				w.dg.batch(li, id, time.Now())
				continue
			}
			w.handle(id)
		}
	}
	if w.inboxN.Load() > 0 {
		busy = true
		w.drainInbox()
	}
	if w.dg != nil && w.dg.wakeHandlers(time.Now()) {
		busy = true
	}
	if len(w.again) > 0 {
		busy = true
		list := w.again
		w.again = nil
		for _, c := range list {
			if c.live() {
				w.read(c, true)
			}
		}
	}
	if !w.draining && w.state.Load() == workerDraining {
		w.draining = true
		w.drainAll()
	}
	return busy
}

// handle takes one event from a ring.
func (w *worker) handle(id uint64) {
	fd, gen := int(id>>32), uint32(id)
	// Take clears the queued mark before it takes the bits: an edge that
	// arrives after it queues the slot again, so nothing that comes during
	// the read is lost.
	now := w.g.nowMs()
	bits, s := w.g.reg.Take(fd, gen, now)
	if s == nil {
		return
	}
	if bits&evSampled != 0 {
		w.beginSample(fd)
		defer w.endSample()
	}
	w.served.Add(1)
	c := w.fds.conn(fd)
	opened := bits&registry.EvOpen != 0
	if opened {
		c = w.open(fd, gen, s, bits)
		if c == nil {
			return
		}
	}
	if c == nil || c.gen != gen || !c.live() {
		w.g.reg.CountStale()
		return
	}
	// One event in sampleEvery of each connection is timed, read and
	// handler together: two clock reads per 16 of its events keep the
	// cost estimate cheap. Counted per connection, not per worker: with
	// one worker-wide count a quiet connection beside a busy one got a
	// sample a minute and was weighed at the worker's average, the busy
	// one's cost (a 10 ms bystander beside 2 ms messages weighed 100x
	// what it costs). Some events are timed besides (timeEvent).
	var t0 time.Time
	if w.timeEvent(c, s.Events()) {
		t0 = time.Now()
	}
	if bits&registry.EvWrite != 0 {
		c.flush()
		w.writable(c)
	}
	if bits&(registry.EvRead|registry.EvHup) != 0 && c.live() {
		// After a hang-up edge the EOF may sit behind the data: no
		// later edge would report it, so that read goes on to EOF.
		w.read(c, bits&registry.EvHup != 0)
	}
	if !t0.IsZero() {
		ns := uint64(time.Since(t0))
		w.sample(c, ns)
	}
	// Not after release: its weight has left the dispatcher already.
	if w.fds.conn(fd) == c {
		w.learn(c, s, now)
	}
	// A connection handed over during a drain hears the goodbye after
	// its first input is served: a request already in the socket (a
	// Modbus master's, say) still gets its answer.
	if opened && w.draining && !c.closed {
		w.drainConn(c)
	}
}

// open makes the conn for a connection just handed over and starts its
// session.
func (w *worker) open(fd int, gen uint32, s *registry.Slot, bits uint32) *conn {
	reason := uint8(bits >> 8)
	if int(reason) >= len(reasonNames) {
		reason = 0
	}
	c := newConn(w, fd, gen, s.Peer(), sniff.Proto(s.Proto()), reason)
	w.seed(c, bits)
	w.fds.setConn(fd, c)
	h := w.pool.handlerFor(c.proto)
	if h == nil {
		c.Close(fmt.Errorf("%w %s", ErrNoHandler, c.proto))
		return nil
	}
	idle := w.pool.idle
	var err error
	if bits&registry.EvProbe != 0 {
		idle = w.g.rt.Load().probeTimeout
		c.probing = true
		err = w.safe(c, nil, func() error {
			c.sess, err = h.(protocols.Prober).Probe(c)
			return err
		})
	} else {
		err = w.safe(c, nil, func() error {
			c.sess, err = h.Open(c)
			return err
		})
	}
	if err != nil {
		c.Close(err)
		return nil
	}
	if idle > 0 {
		c.idleTicks = ticks(idle)
		w.wheel.add(c.id(), w.ticks+uint64(c.idleTicks), timerIdle)
	}
	c.lastActive = uint32(w.ticks)
	w.g.metrics.handedOver(c.proto, w.pool.name)
	return c
}

// read reads c and feeds the session, until the socket is empty (or its
// share of reads is used up); a lingering connection's input is read and
// dropped. A read that returns less than the buffer ends it unless toEOF:
// a stream socket that gave less than asked was empty at that moment, and
// edge-triggered epoll reports whatever arrives after it (handle cleared
// the slot's queued mark before reading, so that edge queues c again).
// That saves the read that would only meet EAGAIN: one read per request
// instead of two. toEOF (a hang-up was reported, or c comes back from the
// again list) reads on to EAGAIN or EOF as before.
func (w *worker) read(c *conn, toEOF bool) {
	if c.closed {
		w.discard(c, toEOF)
		return
	}
	for range readsPerEvent {
		n, err := readFD(int(c.fd), w.rbuf)
		if testHookRead != nil {
			testHookRead(n, err)
		}
		switch {
		case n > 0:
			w.g.reg.CountIn(int(c.fd), c.gen, n)
			// The quarantine hold runs from landing, not from the last
			// input: a peer trickling a byte now and then (slowloris)
			// must not keep its quarantine slot and fd for ever.
			if !w.pool.quarantine {
				c.lastActive = uint32(w.ticks)
			}
			w.feed(c, w.rbuf[:n])
			if c.closed {
				return
			}
			// Deliver what this read published before reading more:
			// subscribers on this worker would otherwise wait, their
			// bus queues filling, until the whole burst is parsed.
			if w.inboxN.Load() > 0 {
				if w.drainInbox(); c.closed {
					return
				}
			}
			if n < len(w.rbuf) && !toEOF {
				w.readStopped()
				return
			}
		case err == nil: // EOF
			c.Close(protocols.ErrPeerClosed)
			return
		case errors.Is(err, errAgain):
			w.readStopped()
			return
		default:
			c.Close(err)
			return
		}
	}
	// Edge-triggered: nobody will tell us again about what is left, so
	// come back after the others had their turn.
	w.again = append(w.again, c)
}

// feed hands input to the session and keeps what it did not consume.
func (w *worker) feed(c *conn, b []byte) {
	data := b
	in := c.input()
	if len(in) > 0 {
		in = append(in, b...)
		c.setInput(in)
		data = in
	}
	for len(data) > 0 && !c.closed {
		n := 0
		var t0 int64
		if w.st.on {
			t0 = w.st.now()
		}
		if benchSlowBuild && benchSlowFor(c) {
			time.Sleep(benchSlow.delay) // benchmark builds only (benchslow.go)
		}
		if testHookData != nil {
			testHookData(c)
		}
		err := w.safe(c, data, func() error {
			var err error
			n, err = c.sess.Data(data)
			return err
		})
		if w.st.on {
			w.handlerNs = max(w.handlerNs, 0) + w.st.now() - t0
		}
		if err != nil {
			c.Close(err)
			return
		}
		if n <= 0 {
			break
		}
		data = data[n:]
		if c.probing {
			c.answered()
		}
	}
	if c.closed {
		return
	}
	if len(data) > w.g.rt.Load().limits.MaxInput {
		w.g.book.Record(c.Peer(), protocols.ReasonOversize, data)
		c.Close(fmt.Errorf("%w: %d unconsumed input bytes", errInputLimit, len(data)))
		return
	}
	switch {
	case len(data) == 0:
		c.setInput(nil) // idle connections keep no buffer
	case len(in) > 0:
		c.setInput(append(in[:0], data...)) // data is a tail of in: copy down
	default:
		c.setInput(append([]byte(nil), data...))
	}
}

// testHookData runs before each Data call: with it a test makes some
// connections' messages cost handler time (set it before the gateway
// starts, clear it after the gateway stops).
var testHookData func(c *conn)

// discard reads a lingering connection's input and drops it, stopping at
// a short read as read does unless toEOF; the peer's EOF, or a socket
// error, releases the connection.
func (w *worker) discard(c *conn, toEOF bool) {
	for range readsPerEvent {
		n, err := readFD(int(c.fd), w.rbuf)
		switch {
		case n > 0 && n < len(w.rbuf) && !toEOF:
			return
		case n > 0:
			continue
		case errors.Is(err, errAgain):
			return
		}
		c.release() // EOF or an error: the peer is done
		return
	}
	w.again = append(w.again, c)
}

var errInputLimit = errors.New("gateway: input limit exceeded")

// readStopped runs where a read stops for want of input (EAGAIN or a
// short read): input that arrives from then on must raise an event that
// reaches the worker. Tests widen that window through testHookReadAgain.
func (w *worker) readStopped() {
	if testHookReadAgain != nil {
		testHookReadAgain()
	}
}

// testHookReadAgain runs where a read stopped for want of input (handle
// clears the slot's queued mark before reading, so what arrives then
// queues the connection again); tests widen the window with it.
// testHookRead sees every read's result; tests count reads with it.
var (
	testHookReadAgain func()
	testHookRead      func(n int, err error)
)

// safe runs a session call and turns a panic into a closed, recorded
// connection: the worker lives on.
func (w *worker) safe(c *conn, input []byte, call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.g.metrics.panics.Inc()
			w.g.book.Record(c.Peer(), protocols.ReasonPanic, input)
			w.g.log.Error("handler panic", "peer", c.Peer().String(), "proto", c.proto.String(), "panic", fmt.Sprint(r))
			c.recorded = true
			err = fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	err = call()
	switch {
	case err == nil || c.recorded:
	case errors.Is(err, protocols.ErrPanic):
		// The session recovered its own panic, to answer its peer first:
		// counted and recorded as the panics recovered here are.
		w.g.metrics.panics.Inc()
		w.g.book.Record(c.Peer(), protocols.ReasonPanic, input)
		c.recorded = true
	case errors.Is(err, protocols.ErrMalformed):
		w.g.book.Record(c.Peer(), protocols.ReasonMalformed, input)
		c.recorded = true
	}
	return err
}

var errPanic = fmt.Errorf("gateway: handler: %w", protocols.ErrPanic)

// notify queues c for Notified; safe from any goroutine.
func (w *worker) notify(c *conn) {
	if !c.notified.CompareAndSwap(0, 1) {
		return
	}
	w.inboxMu.Lock()
	w.inbox = append(w.inbox, c.id())
	w.inboxMu.Unlock()
	w.inboxN.Add(1)
	w.wake()
}

func (w *worker) drainInbox() {
	w.inboxMu.Lock()
	w.taken, w.inbox = w.inbox, w.taken[:0]
	w.inboxN.Store(0)
	w.inboxMu.Unlock()
	for _, id := range w.taken {
		fd, gen := int(id>>32), uint32(id)
		c := w.fds.conn(fd)
		if c == nil || c.gen != gen || c.closed {
			continue
		}
		c.notified.Store(0)
		n, ok := c.sess.(protocols.Notified)
		if !ok {
			continue
		}
		if err := w.safe(c, nil, n.Notified); err != nil {
			c.Close(err)
		}
	}
}

// writable tells a session that holds output back while the socket is
// full (protocols.Writable) that its buffered output is all written.
func (w *worker) writable(c *conn) {
	if c.closed || c.Buffered() > 0 {
		return
	}
	if ws, ok := c.sess.(protocols.Writable); ok {
		if err := w.safe(c, nil, ws.Writable); err != nil {
			c.Close(err)
		}
	}
}

// tick advances the worker's wheel: idle timeouts and session timers.
func (w *worker) tick(now uint64) {
	w.ticks = now
	w.wheel.advance(now, func(t timer) {
		fd, gen := int(t.id>>32), uint32(t.id)
		c := w.fds.conn(fd)
		if c == nil || c.gen != gen || c.closed {
			return
		}
		if t.kind == timerSession {
			w.sessionTimer(c, t.due)
			return
		}
		if c.idleTicks == 0 {
			return // the probe was answered and the pool has no idle timeout
		}
		// Difference, not comparison: ticks are 32-bit and wrap.
		if left := int32(c.lastActive + c.idleTicks - uint32(now)); left > 0 {
			w.wheel.add(t.id, now+uint64(left), timerIdle)
			return
		}
		if c.probing {
			w.g.book.Record(c.Peer(), protocols.ReasonTimeout, nil)
			c.recorded = true
		}
		c.Close(protocols.ErrIdle)
	})
}

// sessionTimer runs a session's Timer unless SetTimer replaced or
// cancelled this one.
func (w *worker) sessionTimer(c *conn, due uint32) {
	if c.timerDue == 0 || c.timerDue != due {
		return
	}
	c.timerDue = 0
	if ts, ok := c.sess.(protocols.Timed); ok {
		if err := w.safe(c, nil, ts.Timer); err != nil {
			c.Close(err)
		}
	}
}

// drainAll tells every connection that the gateway drains.
func (w *worker) drainAll() {
	if w.dg != nil {
		w.dg.drain(time.Now())
	}
	w.fds.each(func(c *conn) {
		if !c.closed {
			w.drainConn(c)
		}
	})
}

// drainConn gives a session its Drain call, or closes a session that has
// none; while the worker drains, closing lingers (conn.Close).
func (w *worker) drainConn(c *conn) {
	d, ok := c.sess.(protocols.Drainer)
	if !ok {
		c.Close(protocols.ErrShutdown)
		return
	}
	if err := w.safe(c, nil, d.Drain); err != nil {
		c.Close(err)
	}
}

// stopAll closes every connection now, lingering ones too: the grace is
// over, or the gateway closes without one.
func (w *worker) stopAll() {
	w.stopping = true
	w.fds.each(func(c *conn) {
		if !c.closed {
			c.Close(protocols.ErrShutdown)
		}
		c.release()
	})
}

// drain asks the worker to tell its connections the gateway is going.
func (w *worker) drain() {
	w.state.CompareAndSwap(workerRunning, workerDraining)
	w.wake()
}

func (w *worker) stop() {
	w.state.Store(workerStopped)
	w.wake()
}

// depth is how many events wait in this worker's rings (metrics, and
// whether its turn is short enough to lend).
func (w *worker) depth() int {
	n := 0
	for _, r := range w.rings {
		n += r.Len()
	}
	return n
}
