package route

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Spin limits for NewParker.
const (
	// DefaultSpin is how many times Park polls ready (yielding between
	// polls) before it sleeps. BenchmarkPingPong (two goroutines, two
	// Parkers, GOMAXPROCS 2, 2026-12-05): no spin, every handoff sleeps,
	// 429-436 ns a round trip; 8 polls, 248-263 ns, a park in 2,000-3,500
	// round trips; 16, 64 and 256 polls 839-1,747 ns, each poll's trip
	// through the scheduler costing more than the sleeps it saves. Live
	// (echocompare, default placement, 8 against 64 alternated three
	// times per row: 1k/1k 64 B closed loop, 1k/1k at 5,000 requests/s,
	// 19k/50 1 KiB) 8 used 1-5 % less CPU per request in all nine pairs
	// and fan-out delivered as much. It was 64 before.
	DefaultSpin = 8
	// MaxSpin caps a configured spin count: past a few thousand polls a
	// worker burns a core for nothing on these small boxes.
	MaxSpin = 1 << 14
)

// Parker states. The word is written by the parking worker (running ->
// parked, and back on its own) and by the one Unpark that wins the
// parked -> running CAS.
const (
	stateRunning uint32 = iota
	stateParked         // published, the last re-check of ready() under way
	stateAsleep         // past the re-check: asleep, or about to be; Borrow may take the turn
	stateLent           // a borrower runs the worker's turn (Borrow)
	stateLentDue        // lent, and the worker's timed sleep ended meanwhile: Return wakes it
)

// Sleeper is the primitive a Parked worker sleeps on. The Parker
// guarantees that Wake is called at most once per Sleep that needs it, and
// that every Wake is eventually consumed by a Sleep, so a Sleeper needs no
// state machine of its own: a one-token semaphore is enough.
type Sleeper interface {
	// Sleep blocks until Wake or, when timeout > 0, until timeout passes.
	// It reports whether a Wake token was consumed.
	Sleep(timeout time.Duration) (woken bool)
	// Wake hands one token to the sleeping (or about to sleep) worker.
	// Safe from any goroutine.
	Wake()
	// Close releases the primitive. Call it only once nothing sleeps.
	Close() error
}

// ParkerStats counts what a Parker did. Counters only grow.
type ParkerStats struct {
	Parks    uint64 // times the worker actually went to sleep
	Wakes    uint64 // wakes handed to a sleeping worker, by Unpark or by Return
	Spurious uint64 // wakes after which ready() still reported no work
	Timeouts uint64 // sleeps that ended by timeout
	Lends    uint64 // turns taken by Borrow
}

// Parker lets one worker goroutine sleep until a producer has work for it.
//
// The protocol is the classic one for avoiding lost wakeups:
//
//	worker (Park)                       producer (Unpark, after publishing work)
//	  spin: poll ready(), yield           if state is not parked or asleep: return (one load)
//	  state = parked                      if CAS(that state -> running):
//	  if ready(): undo and return             sleeper.Wake()
//	  CAS(parked -> asleep), sleep
//
// Go atomics are sequentially consistent, so either the worker's re-check
// sees the producer's work, or the producer's load sees "parked" (or
// "asleep") and wakes it. Only the Unpark that wins the CAS calls Wake, so
// each sleep gets at most one token; a worker that gives up on its own
// (ready on the re-check, or a timeout) must win the same CAS, and if it
// loses, it consumes the token that is on its way so that the next Park
// does not wake for nothing.
//
// A worker that is asleep can lend its turn (Borrow, Return): a producer
// that would only wake it and wait for it runs the turn itself, on its
// own goroutine, while the worker sleeps on. "asleep" is the state past
// the re-check, since the re-check reads the worker's own state, which a
// borrower changes. While lent, Unpark does nothing, so Return looks for
// queued work once more after the turn is back (the same re-check, now on
// the borrower's side) and wakes the worker for it; a timed sleep that
// ends while lent marks the state and waits for Return to wake it.
//
// Park must be called from one goroutine (the worker); Unpark and Borrow
// from any.
type Parker struct {
	state    atomic.Uint32
	spin     int
	oneP     bool // GOMAXPROCS was 1 when last read: spin at most once
	sleeper  Sleeper
	parks    atomic.Uint64
	wakes    atomic.Uint64
	spurious atomic.Uint64
	timeouts atomic.Uint64
	lends    atomic.Uint64
}

// NewParker returns a Parker that sleeps on a ChanParker, the default
// primitive. BenchmarkWakeLatency (wake_bench_test.go) decided it: parked
// as the gateway's workers parked then (64 polls, a 100 ms timeout) and woken
// by a producer that yields once after waking (see Unpark), a channel wake
// reaches the worker in about 0.9 µs at the median against about 15 µs
// for an eventfd, whose sleeping worker waits in ppoll and then read,
// holding an OS thread, and makes the runtime hand its P away and back.
// spin is the number of polls
// before sleeping: 0 means DefaultSpin, a negative value means none, and
// values over MaxSpin are capped.
func NewParker(spin int) *Parker {
	return NewParkerWith(spin, NewChanParker())
}

// NewParkerWith returns a Parker sleeping on s; spin is as for NewParker.
func NewParkerWith(spin int, s Sleeper) *Parker {
	return &Parker{spin: normalizeSpin(spin), sleeper: s, oneP: runtime.GOMAXPROCS(0) == 1}
}

func normalizeSpin(spin int) int {
	switch {
	case spin == 0:
		return DefaultSpin
	case spin < 0:
		return 0
	case spin > MaxSpin:
		return MaxSpin
	}
	return spin
}

// Park returns when ready() reports work, when an Unpark arrives, or when
// timeout (if > 0) passes; woken is false only in the last case. The
// worker uses timeouts to drive its timers, so a timed Park allocates
// nothing. ready must be cheap and side-effect free; it is called from the
// worker's goroutine only.
//
// A wake can be spurious (the producer's work was already taken during the
// spin); Park then still returns true and counts it, and the caller simply
// finds nothing and parks again.
//
// With one P (GOMAXPROCS 1: a gateway pinned to one core) Park polls at
// most once. That one yield runs whatever goroutine is runnable, the
// producer included; if it produced nothing, the rest of a spin only puts
// this goroutine through the scheduler again and again (each Gosched takes
// the global run queue's lock and reads the clock for the timers), and a
// producer parked in the network poller is not even looked at until the
// run queues are empty. echocompare 1000/1000 64 B pinned: runtime.Gosched
// was 29 % of the gateway's user-space cycles with 64 polls.
// GOMAXPROCS is read again after every sleep, since the runtime may change
// it (CPU affinity, cgroup limits).
func (p *Parker) Park(ready func() bool, timeout time.Duration) (woken bool) {
	spin := p.spin
	if p.oneP {
		spin = min(spin, 1)
	}
	for i := 0; i < spin; i++ {
		if ready() {
			return true
		}
		runtime.Gosched()
	}
	p.state.Store(stateParked)
	if ready() {
		p.unpublish()
		return true
	}
	if !p.state.CompareAndSwap(stateParked, stateAsleep) {
		p.sleeper.Sleep(0) // an Unpark claimed this sleep: take its token
		return true
	}
	p.parks.Add(1)
	slept := p.sleeper.Sleep(timeout)
	p.oneP = runtime.GOMAXPROCS(0) == 1
	if slept {
		if !ready() {
			p.spurious.Add(1)
		}
		return true
	}
	p.timeouts.Add(1)
	if p.unpublish() {
		return false
	}
	return true // an Unpark raced the timeout; its token is consumed
}

// unpublish takes the worker out of the parked state on its own. It
// reports whether no Unpark had claimed the wake; otherwise it consumes
// the token that Unpark has sent or is about to send.
func (p *Parker) unpublish() bool {
	for {
		switch st := p.state.Load(); st {
		case stateParked, stateAsleep:
			if p.state.CompareAndSwap(st, stateRunning) {
				return true
			}
		case stateLent:
			// A borrower has the turn: wait for it to give the turn
			// back (Return sees stateLentDue and wakes us).
			if p.state.CompareAndSwap(stateLent, stateLentDue) {
				p.sleeper.Sleep(0)
				return false
			}
		default: // an Unpark or a Return claimed the sleep; its token is on the way
			p.sleeper.Sleep(0)
			return false
		}
	}
}

// Unpark wakes the worker if it is parked, and reports whether it did.
// Call it after publishing work (a Ring push, say). When the worker is
// running or spinning this is one atomic load.
//
// With ChanParker the woken goroutine is queued on the caller's P and
// runs when that P next schedules: a producer that woke someone should
// call runtime.Gosched once before it blocks in a raw syscall such as
// unix.EpollWait, or the wakeup waits for sysmon (see wake_bench_test.go).
func (p *Parker) Unpark() (woke bool) {
	for {
		st := p.state.Load()
		if st != stateParked && st != stateAsleep {
			return false
		}
		// A failed CAS may only be the worker going from parked to
		// asleep: look again, or this wake is lost.
		if p.state.CompareAndSwap(st, stateRunning) {
			p.wakes.Add(1)
			p.sleeper.Wake()
			return true
		}
	}
}

// Borrow takes the turn of a worker that sleeps: on true the caller owns
// everything the worker owns, runs its work on its own goroutine, and
// must call Return. It fails unless the worker is asleep (past its last
// re-check), so a worker never runs beside its borrower: a timed sleep
// that ends meanwhile waits for Return. While lent, Unpark does nothing;
// Return looks for what came meanwhile.
func (p *Parker) Borrow() bool {
	if p.state.Load() != stateAsleep || !p.state.CompareAndSwap(stateAsleep, stateLent) {
		return false
	}
	p.lends.Add(1)
	return true
}

// Return gives back a turn taken with Borrow. With wake, or when the
// worker's timed sleep ended while lent, the worker is woken to run on
// its own. Otherwise it sleeps on, and queued (atomics only: the worker
// may run again as soon as the turn is back) is asked once more, after
// the turn is back, for work whose producer found the worker lent and
// woke nobody; if there is some, the worker is woken for it.
func (p *Parker) Return(wake bool, queued func() bool) {
	if !wake && p.state.CompareAndSwap(stateLent, stateAsleep) {
		if queued() {
			p.Unpark()
		}
		return
	}
	p.state.Store(stateRunning) // stateLent or stateLentDue: nobody else writes it now
	p.wakes.Add(1)
	p.sleeper.Wake()
}

// Parked reports whether the worker has published that it is asleep (or
// about to be). For metrics and tests.
func (p *Parker) Parked() bool {
	st := p.state.Load()
	return st == stateParked || st == stateAsleep
}

// Stats returns the Parker's counters.
func (p *Parker) Stats() ParkerStats {
	return ParkerStats{
		Parks:    p.parks.Load(),
		Wakes:    p.wakes.Load(),
		Spurious: p.spurious.Load(),
		Timeouts: p.timeouts.Load(),
		Lends:    p.lends.Load(),
	}
}

// Close releases the sleep primitive. Call it after the worker has stopped
// parking.
func (p *Parker) Close() error { return p.sleeper.Close() }

// ChanParker is the default Sleeper: a one-slot channel, plus one reusable
// timer for timed sleeps. A sleeping goroutine costs the runtime nothing
// but a parked G; no OS thread is held.
type ChanParker struct {
	token chan struct{}
	timer *time.Timer
}

// NewChanParker returns a ChanParker with no token pending.
func NewChanParker() *ChanParker {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &ChanParker{token: make(chan struct{}, 1), timer: t}
}

// Sleep implements Sleeper. Since Go 1.23 Reset and Stop discard a stale
// expiry, so reusing the one timer is safe and allocation-free.
func (c *ChanParker) Sleep(timeout time.Duration) bool {
	if timeout <= 0 {
		<-c.token
		return true
	}
	c.timer.Reset(timeout)
	select {
	case <-c.token:
		c.timer.Stop()
		return true
	case <-c.timer.C:
		return false
	}
}

// Wake implements Sleeper. The send never blocks: the Parker hands out at
// most one token per sleep, and the slot holds it if the worker is not in
// its receive yet.
func (c *ChanParker) Wake() {
	select {
	case c.token <- struct{}{}:
	default:
	}
}

// Close implements Sleeper.
func (c *ChanParker) Close() error {
	c.timer.Stop()
	return nil
}
