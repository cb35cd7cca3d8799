package route

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds the measurements behind two choices: which Sleeper the
// Parker uses by default (BenchmarkWakeLatency) and how long a worker
// spins before it parks (BenchmarkPingPong). Run:
//
//	go test -run='^$' -bench='WakeLatency|PingPong' -benchtime=20000x ./route/
//
// They report figures; nothing here asserts a duration. The gateway's own
// wake, through its loop and worker code, is BenchmarkStageWake in
// gateway/stages_bench_test.go.

// settle is how long the producer waits after the consumer said it is
// about to block, so that the measured wake is from a real sleep (the
// consumer's thread idle, or in its syscall) and not from a spin.
const settle = 50 * time.Microsecond

// wakeMechanism is one way for a producer to hand a value to a sleeping
// consumer.
type wakeMechanism interface {
	wait() uint64  // consumer: block until a value arrives
	asleep() bool  // producer: has the consumer committed to sleeping?
	send(v uint64) // producer: deliver v and wake the consumer
	close()
}

// workerTimeout is the timeout a gateway worker parks with (its tick,
// gateway.workerTick): it wakes that often to run its timers.
const workerTimeout = 100 * time.Millisecond

// parkerWake is a Parker in front of a Ring, parked as the consumer says:
// the gateway's workers park with spin DefaultSpin and workerTimeout.
type parkerWake struct {
	p       *Parker
	r       *Ring
	ready   func() bool
	timeout time.Duration
}

func newParkerWake(tb testing.TB, s Sleeper, spin int, timeout time.Duration) *parkerWake {
	r, err := NewRing(64)
	if err != nil {
		tb.Fatal(err)
	}
	w := &parkerWake{p: NewParkerWith(spin, s), r: r, timeout: timeout}
	w.ready = func() bool { return r.Len() > 0 }
	return w
}

func (w *parkerWake) wait() uint64 {
	for {
		if v, ok := w.r.Pop(); ok {
			return v
		}
		w.p.Park(w.ready, w.timeout)
	}
}
func (w *parkerWake) asleep() bool  { return w.p.Parked() }
func (w *parkerWake) send(v uint64) { w.r.Push(v); w.p.Unpark() }
func (w *parkerWake) close()        { w.p.Close() }

type chanWake struct{ ch chan uint64 }

func (w *chanWake) wait() uint64  { return <-w.ch }
func (w *chanWake) asleep() bool  { return true } // the armed handshake is all we can see
func (w *chanWake) send(v uint64) { w.ch <- v }
func (w *chanWake) close()        {}

type condWake struct {
	mu   sync.Mutex
	cond sync.Cond
	v    uint64
	has  bool
}

func newCondWake() *condWake {
	w := &condWake{}
	w.cond.L = &w.mu
	return w
}

func (w *condWake) wait() uint64 {
	w.mu.Lock()
	for !w.has {
		w.cond.Wait()
	}
	w.has = false
	v := w.v
	w.mu.Unlock()
	return v
}
func (w *condWake) asleep() bool { return true }
func (w *condWake) send(v uint64) {
	w.mu.Lock()
	w.v, w.has = v, true
	w.mu.Unlock()
	w.cond.Signal()
}
func (w *condWake) close() {}

// wakeMechanisms are the candidates. The Parkers park as the gateway's
// workers do (DefaultSpin, workerTimeout); "untimed" is Park(ready, 0)
// with no spin, the path this benchmark measured before, kept to show
// what the timeout costs each primitive (a timer per ChanParker sleep,
// a ppoll before the read for the eventfd).
var wakeMechanisms = []struct {
	name string
	make func(testing.TB) wakeMechanism
}{
	{"ChanParker", func(tb testing.TB) wakeMechanism {
		return newParkerWake(tb, NewChanParker(), DefaultSpin, workerTimeout)
	}},
	{"EventfdParker", func(tb testing.TB) wakeMechanism {
		return newParkerWake(tb, newEventfd(tb), DefaultSpin, workerTimeout)
	}},
	{"ChanParker-untimed", func(tb testing.TB) wakeMechanism {
		return newParkerWake(tb, NewChanParker(), -1, 0)
	}},
	{"EventfdParker-untimed", func(tb testing.TB) wakeMechanism {
		return newParkerWake(tb, newEventfd(tb), -1, 0)
	}},
	{"chan-uint64", func(testing.TB) wakeMechanism { return &chanWake{ch: make(chan uint64)} }},
	{"sync.Cond", func(testing.TB) wakeMechanism { return newCondWake() }},
}

func newEventfd(tb testing.TB) *EventfdParker {
	e, err := NewEventfdParker()
	if err != nil {
		tb.Skip(err)
	}
	return e
}

// producerModes are what the producer does right after it wakes the
// consumer; for a Go channel wakeup this decides everything, because the
// woken goroutine is queued on the producer's own P (runnext) and runs
// only when that P schedules, or another P steals it, or sysmon retakes
// the P from a syscall.
var producerModes = []struct {
	name  string
	after func()
}{
	// busy: keeps its P for settle (an epoll loop working through a batch).
	{"busy", func() {
		for t := time.Now(); time.Since(t) < settle; {
		}
	}},
	// syscall: blocks its thread in a raw syscall for settle, as an epoll
	// loop does in unix.EpollWait.
	{"syscall", rawSleep},
	// gosched-syscall: yields once, then blocks as above: what a loop can
	// do before EpollWait when it unparked someone in this batch.
	{"gosched-syscall", func() { runtime.Gosched(); rawSleep() }},
}

// rawSleep blocks the thread in nanosleep(2), not in the Go scheduler.
func rawSleep() {
	ts := unix.NsecToTimespec(int64(settle))
	_ = unix.Nanosleep(&ts, nil)
}

// measureWakeLatency runs len(lat) handoffs to a sleeping consumer and
// fills lat with each one's enqueue-to-running latency in nanoseconds.
// after runs on the producer right after each wake.
func measureWakeLatency(m wakeMechanism, lat []int64, after func()) {
	base := time.Now()
	var armed atomic.Int64 // i+1 once the consumer is about to wait for value i
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range lat {
			armed.Store(int64(i + 1))
			v := m.wait()
			lat[i] = int64(time.Since(base)) - int64(v)
		}
	}()
	for i := range lat {
		for armed.Load() != int64(i+1) || !m.asleep() {
			runtime.Gosched()
		}
		// Let the consumer's thread go idle (or its P be retaken) so the
		// wake is from a real sleep, not from a spin.
		for t := time.Now(); time.Since(t) < settle; {
			runtime.Gosched()
		}
		m.send(uint64(time.Since(base)))
		after()
	}
	<-done
}

// percentile returns the p-th percentile (0..100) of sorted.
func percentile(sorted []int64, p int) int64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)*p/100, len(sorted)-1)]
}

// BenchmarkWakeLatency reports p50/p99 enqueue-to-running latency of a
// sleeping consumer for each mechanism and producer behaviour; the
// gateway's loop is gosched-syscall, its workers park as ChanParker and
// EventfdParker do here. ns/op is hidden: it is mostly the settle time.
func BenchmarkWakeLatency(b *testing.B) {
	for _, mode := range producerModes {
		for _, mech := range wakeMechanisms {
			b.Run(mode.name+"/"+mech.name, func(b *testing.B) {
				m := mech.make(b)
				defer m.close()
				lat := make([]int64, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				measureWakeLatency(m, lat, mode.after)
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(percentile(lat, 50)), "p50-ns")
				b.ReportMetric(float64(percentile(lat, 99)), "p99-ns")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// The measurement helper itself must work for every mechanism and mode.
func TestMeasureWakeLatency(t *testing.T) {
	for _, mode := range producerModes {
		for _, mech := range wakeMechanisms {
			t.Run(mode.name+"/"+mech.name, func(t *testing.T) {
				m := mech.make(t)
				defer m.close()
				lat := make([]int64, 10)
				measureWakeLatency(m, lat, mode.after)
				for i, l := range lat {
					if l <= 0 {
						t.Fatalf("handoff %d: latency %d ns", i, l)
					}
				}
			})
		}
	}
}

// BenchmarkPingPong bounces a value between two goroutines through two
// rings and two Parkers: ns/op is one round trip, parks/op how often a
// side had to sleep. It shows what spinning before parking buys.
func BenchmarkPingPong(b *testing.B) {
	type variant struct {
		name  string
		spin  int
		sleep func() Sleeper
	}
	chanS := func() Sleeper { return NewChanParker() }
	eventfdS := func() Sleeper {
		e, err := NewEventfdParker()
		if err != nil {
			b.Skip(err)
		}
		return e
	}
	var variants []variant
	for _, spin := range []int{-1, 8, 16, 64, 256} {
		variants = append(variants, variant{fmt.Sprintf("chan/spin=%d", max(spin, 0)), spin, chanS})
	}
	variants = append(variants,
		variant{"eventfd/spin=0", -1, eventfdS},
		variant{"eventfd/spin=64", 64, eventfdS})
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			pingPong(b, NewParkerWith(v.spin, v.sleep()), NewParkerWith(v.spin, v.sleep()))
		})
	}
}

func pingPong(b *testing.B, pingP, pongP *Parker) {
	defer pingP.Close()
	defer pongP.Close()
	ping, _ := NewRing(8)
	pong, _ := NewRing(8)
	pingReady := func() bool { return ping.Len() > 0 }
	pongReady := func() bool { return pong.Len() > 0 }
	n := b.N
	go func() {
		for range n {
			v, ok := ping.Pop()
			for !ok {
				pingP.Park(pingReady, 0)
				v, ok = ping.Pop()
			}
			pong.Push(v)
			pongP.Unpark()
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range n {
		ping.Push(uint64(i))
		pingP.Unpark()
		_, ok := pong.Pop()
		for !ok {
			pongP.Park(pongReady, 0)
			_, ok = pong.Pop()
		}
	}
	b.StopTimer()
	parks := pingP.Stats().Parks + pongP.Stats().Parks
	b.ReportMetric(float64(parks)/float64(n), "parks/op")
}
