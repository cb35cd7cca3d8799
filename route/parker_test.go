package route

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sleeperKinds are the Sleepers every Parker test runs against.
var sleeperKinds = []struct {
	name string
	make func(t testing.TB) Sleeper
}{
	{"chan", func(testing.TB) Sleeper { return NewChanParker() }},
	{"eventfd", func(t testing.TB) Sleeper {
		e, err := NewEventfdParker()
		if err != nil {
			t.Skipf("eventfd: %v", err)
		}
		return e
	}},
}

func newTestParker(t testing.TB, kind int, spin int) *Parker {
	t.Helper()
	p := NewParkerWith(spin, sleeperKinds[kind].make(t))
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func TestNormalizeSpin(t *testing.T) {
	tests := []struct{ in, want int }{
		{0, DefaultSpin}, {-1, 0}, {-100, 0}, {1, 1}, {500, 500}, {MaxSpin, MaxSpin}, {MaxSpin + 1, MaxSpin},
	}
	for _, tt := range tests {
		if got := normalizeSpin(tt.in); got != tt.want {
			t.Errorf("normalizeSpin(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestParkSpinsOnceOnOneP counts the polls of a Park that finds no work
// and times out: the spin's polls plus the re-check after publishing
// "parked". With one P the spin is cut to one poll; with two it runs whole.
// GOMAXPROCS is read when the Parker is made and after every sleep.
func TestParkSpinsOnceOnOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	polls := 0
	ready := func() bool { polls++; return false }
	for _, tt := range []struct{ procs, want int }{{1, 1 + 1}, {2, DefaultSpin + 1}, {1, 1 + 1}} {
		runtime.GOMAXPROCS(tt.procs)
		p := newTestParker(t, 0, DefaultSpin)
		for range 2 { // the second Park sees what the first read after its sleep
			polls = 0
			if p.Park(ready, time.Millisecond) {
				t.Fatalf("GOMAXPROCS %d: Park with no work and no Unpark reported a wake", tt.procs)
			}
			if polls != tt.want {
				t.Errorf("GOMAXPROCS %d: ready polled %d times, want %d", tt.procs, polls, tt.want)
			}
		}
	}
}

func TestParkReadyReturnsAtOnce(t *testing.T) {
	for k, kind := range sleeperKinds {
		t.Run(kind.name, func(t *testing.T) {
			for _, spin := range []int{-1, 1, DefaultSpin} {
				p := newTestParker(t, k, spin)
				if !p.Park(func() bool { return true }, 0) {
					t.Fatalf("spin %d: Park with work ready returned false", spin)
				}
				if s := p.Stats(); s.Parks != 0 || p.Parked() {
					t.Fatalf("spin %d: slept with work ready: %+v", spin, s)
				}
			}
		})
	}
}

func TestParkTimeout(t *testing.T) {
	for k, kind := range sleeperKinds {
		t.Run(kind.name, func(t *testing.T) {
			p := newTestParker(t, k, -1)
			for range 3 {
				if p.Park(func() bool { return false }, time.Millisecond) {
					t.Fatal("Park with nothing to do and no Unpark returned true")
				}
				if p.Parked() {
					t.Fatal("still marked parked after the timeout")
				}
			}
			if s := p.Stats(); s.Parks != 3 || s.Timeouts != 3 || s.Wakes != 0 {
				t.Fatalf("stats %+v, want 3 parks and 3 timeouts", s)
			}
		})
	}
}

func TestUnparkWakesSleeper(t *testing.T) {
	for k, kind := range sleeperKinds {
		t.Run(kind.name, func(t *testing.T) {
			for _, timeout := range []time.Duration{0, time.Hour} {
				p := newTestParker(t, k, -1)
				var work atomic.Bool
				done := make(chan bool)
				go func() { done <- p.Park(work.Load, timeout) }()
				waitFor(t, "the worker to park", p.Parked)
				work.Store(true)
				if !p.Unpark() {
					t.Fatal("Unpark of a parked worker reported no wake")
				}
				if !<-done {
					t.Fatal("Park returned false after Unpark")
				}
				if s := p.Stats(); s.Wakes != 1 || s.Spurious != 0 {
					t.Fatalf("stats %+v, want 1 wake", s)
				}
			}
		})
	}
}

// A wake with no work behind it is counted as spurious.
func TestSpuriousWake(t *testing.T) {
	for k, kind := range sleeperKinds {
		t.Run(kind.name, func(t *testing.T) {
			p := newTestParker(t, k, -1)
			done := make(chan bool)
			go func() { done <- p.Park(func() bool { return false }, 0) }()
			waitFor(t, "the worker to park", p.Parked)
			p.Unpark()
			if !<-done {
				t.Fatal("Park returned false after Unpark")
			}
			if s := p.Stats(); s.Spurious != 1 {
				t.Fatalf("stats %+v, want 1 spurious", s)
			}
		})
	}
}

func TestUnparkWhenRunningDoesNothing(t *testing.T) {
	p := NewParker(0)
	for range 10 {
		if p.Unpark() {
			t.Fatal("Unpark of a running worker reported a wake")
		}
	}
	if s := p.Stats(); s.Wakes != 0 {
		t.Fatalf("Unpark of a running worker woke it: %+v", s)
	}
	// And left no token behind: a timed Park must time out.
	if p.Park(func() bool { return false }, time.Millisecond) {
		t.Fatal("stale token after Unparks of a running worker")
	}
}

// A producer pushes into a ring and Unparks after each push; the worker
// drains and parks. A lost wakeup would leave the worker asleep with
// values queued and the test would give up waiting. With one P and with
// two: one P cuts the spin to one poll.
func TestNoLostWakeups(t *testing.T) {
	n := uint64(200_000)
	if testing.Short() || raceEnabled {
		n = 20_000
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		for k, kind := range sleeperKinds {
			for _, spin := range []int{-1, 4, DefaultSpin} {
				testNoLostWakeups(t, fmt.Sprintf("procs=%d/%s/spin=%d", procs, kind.name, spin), k, spin, n)
			}
		}
	}
}

func testNoLostWakeups(t *testing.T, name string, k, spin int, n uint64) {
	t.Run(name, func(t *testing.T) {
		p := newTestParker(t, k, spin)
		r, _ := NewRing(64)
		var got atomic.Uint64
		go func() {
			ready := func() bool { return r.Len() > 0 }
			for want := uint64(1); want <= n; {
				v, ok := r.Pop()
				if !ok {
					p.Park(ready, 0)
					continue
				}
				if v != want {
					t.Errorf("popped %d, want %d", v, want)
					return
				}
				want++
				got.Store(v)
			}
		}()
		for v := uint64(1); v <= n; v++ {
			for !r.Push(v) {
				p.Unpark()
				runtime.Gosched()
			}
			p.Unpark()
		}
		waitFor(t, "the worker to drain the ring", func() bool { return got.Load() == n })
		t.Logf("spin %d: %+v", spin, p.Stats())
	})
}

// Unparks racing timed Parks must never leave a stale token behind.
func TestTimeoutRacesUnpark(t *testing.T) {
	rounds := 2000
	if raceEnabled {
		rounds = 500
	}
	for k, kind := range sleeperKinds {
		t.Run(kind.name, func(t *testing.T) {
			p := newTestParker(t, k, -1)
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Vary the gap so that some Parks time out, some are
				// woken, and some see both at once.
				for i := 0; !stop.Load(); i++ {
					p.Unpark()
					for t := time.Now(); time.Since(t) < time.Duration(i%4)*10*time.Microsecond; {
						runtime.Gosched()
					}
				}
			}()
			never := func() bool { return false }
			for range rounds {
				p.Park(never, 20*time.Microsecond)
			}
			stop.Store(true)
			wg.Wait()
			if p.Parked() {
				t.Fatal("left in the parked state")
			}
			if p.Park(never, time.Millisecond) {
				t.Fatalf("stale token after the race: %+v", p.Stats())
			}
			t.Logf("%+v", p.Stats())
		})
	}
}

func TestParkerAllocs(t *testing.T) {
	for k, kind := range sleeperKinds {
		t.Run(kind.name, func(t *testing.T) {
			p := newTestParker(t, k, 2)
			never := func() bool { return false }
			allocs := testing.AllocsPerRun(100, func() {
				p.Unpark()
				p.Park(never, time.Microsecond)
			})
			if allocs != 0 {
				t.Fatalf("timed Park and Unpark allocate %v per run, want 0", allocs)
			}
		})
	}
}

func TestEventfdCloseTwice(t *testing.T) {
	e, err := NewEventfdParker()
	if err != nil {
		t.Skip(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// BenchmarkUnparkRunning is the producer's fast path: the worker is awake.
func BenchmarkUnparkRunning(b *testing.B) {
	p := NewParker(0)
	b.ReportAllocs()
	for b.Loop() {
		p.Unpark()
	}
}
