package gateway

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/sniff"
)

// The worker's side of the datagram path: the handlers' state on this
// worker (one protocols.DatagramWorker per class its pool serves), the
// batches the loops publish, the timers the handlers ask for, and the
// sender that flushes what they queued with sendmmsg.

// dgramWorker is a worker's datagram side; only the worker's goroutine
// (or, inline, its loop's) touches it, but for the counter.
type dgramWorker struct {
	w        *worker
	handlers [numClasses]protocols.DatagramHandler // by class, from the pool
	dws      [numClasses]protocols.DatagramWorker  // made by open, released by close
	due      [numClasses]time.Time                 // when each one wants its next Tick
	idlers   [numClasses]protocols.DatagramIdler   // the dws that can tell they are idle
	got      [numClasses]time.Time                 // when each class last got datagrams
	busy     bool                                  // counted in the gateway's dgBusy
	lanes    []*dgramLane                          // by loop index; nil where no datagram comes from
	out      *dgramOut
	touched  uint8 // classes that got datagrams since their last Tick (bit per class)
	opened   bool
	closed   bool
	panics   uint64        // handler panics on this worker
	received atomic.Uint64 // datagrams handed to the handlers
	// woken is set by DatagramOut.Wake from any goroutine and cleared by
	// the worker before it calls Woken: a Wake that comes during the
	// calls sets it again, so none is lost.
	woken atomic.Bool
	// draining: drain was called; drained: every DatagramDrainer said
	// Drained since (read by the gateway's drain, hence atomic).
	draining bool
	drained  atomic.Bool
}

func newDgramWorker(w *worker, handlers [numClasses]protocols.DatagramHandler, loops int) *dgramWorker {
	return &dgramWorker{w: w, handlers: handlers, lanes: make([]*dgramLane, loops)}
}

// open makes the handlers' per-worker state: index of workers in the pool
// (under the inline policy: the loop's index of the loops). It runs on the
// goroutine that will call them.
func (d *dgramWorker) open(index, workers int, out *dgramOut) {
	d.out = out
	out.wake = d.wakeUp
	d.opened = true
	now := time.Now()
	for c, h := range d.handlers {
		if h == nil {
			continue
		}
		d.safe(sniff.DatagramClass(c), func() { d.dws[c] = h.Worker(index, workers, out) })
		d.due[c] = now
		d.idlers[c], _ = d.dws[c].(protocols.DatagramIdler)
	}
	// Busy until the first Tick says otherwise: the loops keep the short
	// receive step while a worker is starting.
	d.setBusy(true)
}

// close calls every DatagramWorker's Close, once, and lets go of the
// sender's buffers. The lanes stay: a loop may still fill them until it
// ends; the gateway lets go of them once every goroutine is done
// (releaseDatagrams).
func (d *dgramWorker) close() {
	if !d.opened || d.closed {
		return
	}
	d.closed = true
	d.setBusy(false) // gone: it holds no loop to the short step
	for c, dw := range d.dws {
		if dw != nil {
			d.safe(sniff.DatagramClass(c), dw.Close)
			d.dws[c] = nil
			d.idlers[c] = nil
		}
	}
	d.out.release()
}

// batch handles the batch the ring entry e from loop li names, and hands
// the buffer back to that loop.
func (d *dgramWorker) batch(li int, e uint64, now time.Time) {
	lane := d.lanes[li]
	i := batchIndex(e)
	d.handleBatch(&lane.batches[i], now)
	lane.done(i)
}

// handleBatch gives the handlers a batch, one call per run of datagrams
// of one class, in order of arrival, and sends what they queued.
func (d *dgramWorker) handleBatch(b *dgramBatch, now time.Time) {
	if d.closed {
		return
	}
	for i := 0; i < len(b.items); {
		c := b.class[i]
		j := i + 1
		for j < len(b.items) && b.class[j] == c {
			j++
		}
		if dw := d.dws[c]; dw != nil {
			run := b.items[i:j]
			d.safe(c, func() { dw.Datagrams(run, now) })
			d.touched |= 1 << c
			d.got[c] = now
			d.out.flush()
		}
		i = j
	}
	d.received.Add(uint64(len(b.items)))
}

// wakeUp is DatagramOut.Wake: mark, then wake the worker (or, inline,
// its loop). Any goroutine.
func (d *dgramWorker) wakeUp() {
	if d.woken.CompareAndSwap(false, true) {
		d.w.wake()
	}
}

// wakeHandlers calls Woken on every handler that takes it, if a Wake came,
// and sends what they queued; it reports whether one came.
func (d *dgramWorker) wakeHandlers(now time.Time) bool {
	if !d.woken.Load() {
		return false
	}
	d.woken.Store(false)
	if d.closed {
		return true
	}
	for c, dw := range d.dws {
		if wk, ok := dw.(protocols.DatagramWaker); ok {
			d.safe(sniff.DatagramClass(c), func() { wk.Woken(now) })
			d.touched |= 1 << c
		}
	}
	d.out.flush()
	return true
}

// drain tells the handlers that take it (DatagramDrainer) that the
// gateway drains; they keep running until the grace ends.
func (d *dgramWorker) drain(now time.Time) {
	if d.closed {
		return
	}
	d.draining = true
	for c, dw := range d.dws {
		if dr, ok := dw.(protocols.DatagramDrainer); ok {
			d.safe(sniff.DatagramClass(c), func() { dr.Drain(now) })
			d.touched |= 1 << c
		}
	}
	d.out.flush()
}

// tick runs every handler whose Tick is due, or that was given datagrams
// since its last one (they may have armed a timer), sends what they
// queued, and returns how long the worker may wait: until the earliest
// next Tick, at most quietWait.
func (d *dgramWorker) tick(now time.Time) time.Duration {
	next := quietWait
	if d.closed {
		return next
	}
	for c, dw := range d.dws {
		if dw == nil {
			continue
		}
		if d.touched&(1<<c) != 0 || !now.Before(d.due[c]) {
			var wait time.Duration
			d.safe(sniff.DatagramClass(c), func() { wait = dw.Tick(now) })
			d.due[c] = now.Add(tickWait(wait))
		}
		next = min(next, d.due[c].Sub(now))
	}
	d.touched = 0
	d.out.flush()
	if d.draining && !d.drained.Load() && d.sessionsEnded() {
		d.drained.Store(true)
	}
	d.setBusy(!d.idle(now))
	return next
}

// idle reports whether every handler on this worker is idle: those that
// implement protocols.DatagramIdler say so themselves (keepalives do not
// count as work), the others are idle once no datagram came to them for
// idleAfter.
func (d *dgramWorker) idle(now time.Time) bool {
	for c, dw := range d.dws {
		if dw == nil {
			continue
		}
		if il := d.idlers[c]; il != nil {
			idle := false
			d.safe(sniff.DatagramClass(c), func() { idle = il.Idle(now) })
			if !idle {
				return false
			}
		} else if now.Sub(d.got[c]) < idleAfter {
			return false
		}
	}
	return true
}

// idleAfter is how long a handler that cannot tell whether it is idle
// (no protocols.DatagramIdler) counts as busy after its last datagram:
// while its datagrams keep coming, the loops keep the short receive step
// for it.
const idleAfter = time.Second

// setBusy counts the worker in the gateway's dgBusy or out of it; the
// loops read the count when they set their next receive step, and the
// first busy worker wakes those waiting out a long one.
func (d *dgramWorker) setBusy(busy bool) {
	if busy == d.busy {
		return
	}
	d.busy = busy
	if busy {
		if d.w.g.dgBusy.Add(1) == 1 {
			d.w.g.wakeLongSteps()
		}
	} else {
		d.w.g.dgBusy.Add(-1)
	}
}

// sessionsEnded asks every DatagramDrainer whether its sessions are gone.
func (d *dgramWorker) sessionsEnded() bool {
	for c, dw := range d.dws {
		if dr, ok := dw.(protocols.DatagramDrainer); ok {
			ended := true
			d.safe(sniff.DatagramClass(c), func() { ended = dr.Drained() })
			if !ended {
				return false
			}
		}
	}
	return true
}

// tickWait turns what Tick returned into the wait before the next one:
// 0 (nothing pending) and anything longer than quietWait become
// quietWait, since Tick runs at least that often.
func tickWait(wait time.Duration) time.Duration {
	if wait <= 0 || wait > quietWait {
		return quietWait
	}
	return wait
}

// safe runs a handler call; a panic is counted (edgemux_handler_panics_total)
// and logged, less and less often if it keeps coming, and the worker lives
// on.
func (d *dgramWorker) safe(c sniff.DatagramClass, call func()) {
	defer func() {
		if r := recover(); r != nil {
			g := d.w.g
			g.metrics.panics.Inc()
			if d.panics++; logWorthy(d.panics) {
				g.log.Error("datagram handler panic", "class", c.String(), "pool", d.w.pool.name, "panic", fmt.Sprint(r), "times", d.panics)
			}
		}
	}()
	call()
}

// logWorthy says whether the nth occurrence of a failure that may repeat
// for every datagram gets a log line: the 1st, 2nd, 4th, 8th... (the
// count is in /metrics).
func logWorthy(n uint64) bool { return n&(n-1) == 0 }

// quietWait is how long a loop or worker with no deadline of its own
// sleeps when nothing wakes it: an idle gateway wakes about once a second
// per goroutine, not every 100 ms tick (TestIdleGatewaySleeps).
const quietWait = time.Second

// parkTimeout is how long an idle worker may park: until the next Tick a
// datagram handler asked for, at most workerTick (its own timers' step)
// while its wheel holds connection timers or it drains, else quietWait.
func (w *worker) parkTimeout(now time.Time) time.Duration {
	wait := workerTick
	if w.wheel.len() == 0 && w.state.Load() == workerRunning {
		wait = quietWait
	}
	if w.dg == nil {
		return wait
	}
	return min(wait, w.dg.tick(now))
}

// releaseDatagrams lets go of every lane's batch buffers once no loop or
// worker runs: a Gateway kept after Run returns holds none of them.
func (g *Gateway) releaseDatagrams() {
	for _, l := range g.loops {
		l.dgRoutes = [numClasses]*dgramRoute{}
		l.dirty = nil
	}
	for _, w := range g.workers {
		if w.dg != nil {
			clear(w.dg.lanes)
		}
	}
}
