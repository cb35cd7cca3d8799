package route

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Borrow takes only a sleeping worker's turn, and Return gives it back:
// asleep when nothing came meanwhile, woken when something did.
func TestBorrowAndReturn(t *testing.T) {
	for k, kind := range sleeperKinds {
		t.Run(kind.name, func(t *testing.T) {
			p := newTestParker(t, k, -1)
			if p.Borrow() {
				t.Fatal("borrowed a running worker's turn")
			}
			var work atomic.Bool
			done := make(chan bool, 1)
			go func() { done <- p.Park(work.Load, 0) }()
			waitFor(t, "the worker to sleep", p.Borrow)
			if p.Borrow() {
				t.Fatal("lent twice")
			}
			if p.Unpark() {
				t.Fatal("Unpark woke a lent worker")
			}
			p.Return(false, work.Load)
			if st := p.state.Load(); st != stateAsleep {
				t.Fatalf("state %d after a Return with nothing queued, want asleep", st)
			}
			// Work that came while lent (its producer's Unpark did nothing):
			// Return's look after giving the turn back wakes the worker.
			if !p.Borrow() {
				t.Fatal("could not borrow the sleeping worker again")
			}
			work.Store(true)
			p.Unpark()
			p.Return(false, work.Load)
			waitFor(t, "the worker to wake for what came while lent", func() bool { return len(done) > 0 })
			if !<-done {
				t.Fatal("Park returned false")
			}
			if s := p.Stats(); s.Wakes != 1 || s.Lends != 2 {
				t.Fatalf("stats %+v, want 2 lends and 1 wake", s)
			}
		})
	}
}

// Return with wake hands the worker its turn back awake.
func TestReturnWakes(t *testing.T) {
	for k, kind := range sleeperKinds {
		t.Run(kind.name, func(t *testing.T) {
			p := newTestParker(t, k, -1)
			done := make(chan bool, 1)
			go func() { done <- p.Park(func() bool { return false }, 0) }()
			waitFor(t, "the worker to sleep", p.Borrow)
			p.Return(true, func() bool { return false })
			if !<-done {
				t.Fatal("Park returned false")
			}
			if p.Parked() {
				t.Fatal("still parked after Return(true)")
			}
		})
	}
}

// A timed sleep that ends while the turn is lent waits for Return: the
// worker never runs beside its borrower.
func TestTimeoutWhileLentWaitsForReturn(t *testing.T) {
	for k, kind := range sleeperKinds {
		t.Run(kind.name, func(t *testing.T) {
			p := newTestParker(t, k, -1)
			never := func() bool { return false }
			done := make(chan bool, 1)
			for {
				go func() { done <- p.Park(never, time.Millisecond) }()
				waitFor(t, "the worker to sleep or time out", func() bool {
					return p.Borrow() || len(done) > 0
				})
				if len(done) == 0 {
					break // borrowed before the timeout
				}
				<-done // it timed out first: again
			}
			waitFor(t, "the sleep to end while lent", func() bool { return p.state.Load() == stateLentDue })
			select {
			case <-done:
				t.Fatal("the worker ran while its turn was lent")
			default:
			}
			p.Return(false, never)
			if !<-done {
				t.Fatal("Park reported a timeout whose turn was lent")
			}
			if p.Parked() || p.Park(never, time.Millisecond) {
				t.Fatalf("state or token left behind: %+v", p.Stats())
			}
		})
	}
}

// The lending handshake's race: a producer pushes and Unparks, the worker
// drains and parks with no timeout, and a borrower takes the sleeping
// worker's turn whenever it can and drains in its place. A lost wakeup
// (work queued while lent, nobody woken) leaves the worker asleep for good
// and the test gives up waiting; a turn run by both at once trips the
// owner check, and under -race the plain fields they share. As the
// gateway's worker does, the worker's own re-check (ready) reads a plain
// field of the turn's (pending, as the worker's again list), so a borrow
// before that re-check is over is a race; Return's look (queued) reads
// atomics only, since the worker may run again as soon as it has its
// turn back.
func TestLendingLosesNoWakeups(t *testing.T) {
	n := uint64(200_000)
	if testing.Short() || raceEnabled {
		n = 20_000
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		for k, kind := range sleeperKinds {
			for _, spin := range []int{-1, DefaultSpin} {
				testLending(t, fmt.Sprintf("procs=%d/%s/spin=%d", procs, kind.name, spin), k, spin, n)
			}
		}
	}
	if lentTurns.Load() == 0 {
		t.Fatal("no run lent a turn: the handshake was not exercised")
	}
}

// lentTurns counts the turns TestLendingLosesNoWakeups's runs lent.
var lentTurns atomic.Uint64

func testLending(t *testing.T, name string, k, spin int, n uint64) {
	t.Run(name, func(t *testing.T) {
		p := newTestParker(t, k, spin)
		r, _ := NewRing(64)
		var (
			owner   atomic.Int32
			next    = uint64(1) // plain: only the turn's owner touches it
			pending = 0         // plain, as next; never left above 0 by a turn
			got     atomic.Uint64
			stop    atomic.Bool
		)
		queued := func() bool { return r.Len() > 0 }
		ready := func() bool { return pending > 0 || queued() }
		// drain is the turn: what the ring holds, in order, by one owner.
		drain := func(who string) bool {
			if !owner.CompareAndSwap(0, 1) {
				t.Errorf("%s runs a turn that another holds", who)
			}
			defer owner.Store(0)
			pending++
			defer func() { pending-- }()
			any := false
			for {
				v, ok := r.Pop()
				if !ok {
					return any
				}
				any = true
				if v != next {
					t.Errorf("%s popped %d, want %d", who, v, next)
				}
				next++
				got.Store(v)
			}
		}
		workerDone := make(chan struct{})
		go func() {
			defer close(workerDone)
			for !stop.Load() {
				if !drain("the worker") {
					p.Park(ready, 0)
				}
			}
		}()
		borrowerDone := make(chan struct{})
		go func() {
			defer close(borrowerDone)
			for !stop.Load() {
				if p.Borrow() {
					drain("the borrower")
					p.Return(false, queued)
				}
				runtime.Gosched()
			}
		}()
		for v := uint64(1); v <= n; v++ {
			for !r.Push(v) {
				p.Unpark()
				runtime.Gosched()
			}
			p.Unpark()
		}
		waitFor(t, "the ring to be drained", func() bool { return got.Load() == n })
		stop.Store(true)
		// Both gone before the cleanup closes the sleeper: a Return
		// after that would wake through a closed eventfd.
		<-borrowerDone
		waitFor(t, "the worker to stop", func() bool {
			p.Unpark()
			return isClosed(workerDone)
		})
		s := p.Stats()
		lentTurns.Add(s.Lends)
		t.Logf("spin %d: %+v", spin, s)
	})
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
