package gateway

// Per-stage cost of the path an event takes through the gateway, measured
// on the same stages as seed 002's table (registry lookup, sniff, route,
// enqueue, wake). examples/bench/stages.sh runs them and prints the figures
// next to the seed's. Run by hand:
//
//	go test -run='^$' -bench=BenchmarkStage -benchmem ./gateway/
//
// Nothing here asserts a duration; TestStagesDoNotAllocate asserts the
// zero-allocation claims of the hot stages.

import (
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/route"
	"github.com/edgemux/edgemux/sniff"
)

// stageFD is the descriptor the stage benchmarks pretend to serve.
const stageFD = 7

// stageSniffInputs are first bytes of the three flows seed 002 sniffed.
var stageSniffInputs = []struct {
	name  string
	bytes []byte
	want  sniff.Proto
}{
	// mbpoll: read 10 holding registers from unit 1.
	{"modbus", []byte{0x00, 0x01, 0x00, 0x00, 0x00, 0x06, 0x01, 0x03, 0x00, 0x00, 0x00, 0x0a}, sniff.Modbus},
	{"http", []byte("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:5020\r\nAccept: */*\r\n\r\n"), sniff.HTTP},
	{"private", stageHello(), sniff.Private},
}

func stageHello() []byte {
	b, err := private.AppendHello(nil, private.Hello{DeviceID: []byte("bench-device-0001"), Keepalive: 30})
	if err != nil {
		panic("stage fixture: " + err.Error()) // a constant input: a bug here is ours
	}
	return b
}

// stageRegistry returns a registry with stageFD open and its generation.
func stageRegistry(tb testing.TB) (*registry.Registry, uint32) {
	tb.Helper()
	reg := registry.New(1024)
	gen, err := reg.Open(stageFD, netip.MustParseAddrPort("127.0.0.2:40000"), 0, 1)
	if err != nil {
		tb.Fatal(err)
	}
	if err := reg.Classify(stageFD, gen, uint8(sniff.Private), 0, registry.Active); err != nil {
		tb.Fatal(err)
	}
	return reg, gen
}

// stageDispatcher is four workers that all take the private protocol.
func stageDispatcher(tb testing.TB) *route.Dispatcher {
	tb.Helper()
	specs := make([]route.WorkerSpec, 4)
	for i := range specs {
		specs[i].Allowed = 1 << sniff.Private
	}
	d, err := route.NewDispatcher(route.Entropy, specs, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// stageQueue is one slot's trip through a ring, both sides in one
// goroutine: what loop.deliver and worker.handle do with the slot's
// Pending bits and its coalescing Queued flag.
type stageQueue struct {
	reg  *registry.Registry
	gen  uint32
	ring *route.Ring
}

func newStageQueue(tb testing.TB) *stageQueue {
	tb.Helper()
	reg, gen := stageRegistry(tb)
	ring, err := route.NewRing(4096)
	if err != nil {
		tb.Fatal(err)
	}
	return &stageQueue{reg: reg, gen: gen, ring: ring}
}

// roundTrip enqueues one read event and takes it off again; it reports
// the bits the consumer saw (0 means the event was lost).
func (q *stageQueue) roundTrip() uint32 {
	// Producer (loop.deliver).
	if q.reg.Post(stageFD, q.gen, registry.EvRead) {
		q.ring.Push(uint64(stageFD)<<32 | uint64(q.gen))
	}
	// Consumer (worker.handle).
	id, ok := q.ring.Pop()
	if !ok {
		return 0
	}
	bits, _ := q.reg.Take(int(id>>32), uint32(id), 0)
	return bits
}

func BenchmarkStageRegistryLookup(b *testing.B) {
	reg, gen := stageRegistry(b)
	b.ReportAllocs()
	for b.Loop() {
		if reg.Lookup(stageFD, gen) == nil {
			b.Fatal("lookup missed")
		}
	}
}

func BenchmarkStageSniff(b *testing.B) {
	for _, in := range stageSniffInputs {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if sniff.Detect(in.bytes).Proto != in.want {
					b.Fatal("misclassified")
				}
			}
		})
	}
}

func BenchmarkStageRoute(b *testing.B) {
	d := stageDispatcher(b)
	b.ReportAllocs()
	for b.Loop() {
		w := d.Pick(uint8(sniff.Private), route.PatternSteady)
		if w < 0 {
			b.Fatal("no worker")
		}
		d.Release(w)
	}
}

func BenchmarkStageEnqueue(b *testing.B) {
	q := newStageQueue(b)
	b.ReportAllocs()
	for b.Loop() {
		if q.roundTrip() == 0 {
			b.Fatal("event lost")
		}
	}
}

// BenchmarkStageWake reports the enqueue-to-running latency of a parked
// worker (p50/p99, ns): the producer pushes a timestamp and unparks the
// worker, then behaves as the epoll loop does after a wake (one
// runtime.Gosched, then a blocking syscall); the worker pops the
// timestamp. It follows route/wake_bench_test.go's method, which cannot
// be called from here (it lives in route's test files). ns/op is hidden:
// it is mostly the settle time that makes every wake a real sleep.
func BenchmarkStageWake(b *testing.B) {
	lat := make([]int64, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	stageMeasureWake(b, lat)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(stagePercentile(lat, 50)), "p50-ns")
	b.ReportMetric(float64(stagePercentile(lat, 99)), "p99-ns")
	b.ReportMetric(0, "ns/op")
}

// stageSettle lets a parked worker's goroutine really go to sleep before
// the producer wakes it, so the figure is a wake and not a spin.
const stageSettle = 50 * time.Microsecond

// stageMeasureWake runs len(lat) handoffs and fills lat with each one's
// latency in nanoseconds.
func stageMeasureWake(tb testing.TB, lat []int64) {
	ring, err := route.NewRing(64)
	if err != nil {
		tb.Fatal(err)
	}
	// The gateway's own parker (route.NewParker, channel sleeper), with no
	// spin so that every handoff finds the worker asleep.
	park := route.NewParker(-1)
	defer park.Close()
	ready := func() bool { return ring.Len() > 0 }
	base := time.Now()
	var armed atomic.Int64 // i+1 once the worker waits for handoff i
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range lat {
			armed.Store(int64(i + 1))
			v, ok := ring.Pop()
			for !ok {
				park.Park(ready, 0)
				v, ok = ring.Pop()
			}
			lat[i] = int64(time.Since(base)) - int64(v)
		}
	}()
	for i := range lat {
		for armed.Load() != int64(i+1) || !park.Parked() {
			runtime.Gosched()
		}
		for t := time.Now(); time.Since(t) < stageSettle; {
			runtime.Gosched()
		}
		ring.Push(uint64(time.Since(base)))
		park.Unpark()
		runtime.Gosched() // what loop.run does before EpollWait after a wake
		stageRawSleep()
	}
	<-done
}

// stageRawSleep blocks the thread in nanosleep(2), as the loop blocks in
// epoll_wait, not in the Go scheduler.
func stageRawSleep() {
	ts := unix.NsecToTimespec(int64(stageSettle))
	_ = unix.Nanosleep(&ts, nil)
}

// stagePercentile returns the p-th percentile (0..100) of sorted.
func stagePercentile(sorted []int64, p int) int64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)*p/100, len(sorted)-1)]
}

// The fixtures must take the paths they are named after, or the
// benchmarks measure something else.
func TestStageFixtures(t *testing.T) {
	for _, in := range stageSniffInputs {
		if r := sniff.Detect(in.bytes); r.Verdict != sniff.Match || r.Proto != in.want {
			t.Errorf("%s: Detect = %+v, want match %v", in.name, r, in.want)
		}
	}
	q := newStageQueue(t)
	for i := range 3 {
		if bits := q.roundTrip(); bits != registry.EvRead {
			t.Fatalf("round trip %d: bits %#x, want EvRead", i, bits)
		}
	}
	if n := q.ring.Len(); n != 0 {
		t.Fatalf("ring holds %d events after the round trips", n)
	}
	d := stageDispatcher(t)
	seen := map[int]bool{}
	for range 8 {
		w := d.Pick(uint8(sniff.Private), route.PatternSteady)
		seen[w] = true
		d.Release(w)
	}
	if len(seen) != 4 {
		t.Errorf("entropy spread idle picks over %d workers, want 4", len(seen))
	}
	lat := make([]int64, 20)
	stageMeasureWake(t, lat)
	for i, l := range lat {
		if l <= 0 {
			t.Fatalf("handoff %d: latency %d ns", i, l)
		}
	}
}

// TestStagesDoNotAllocate asserts the zero-allocation claim of every hot
// stage but the wake (whose channel send is the runtime's business).
func TestStagesDoNotAllocate(t *testing.T) {
	reg, gen := stageRegistry(t)
	d := stageDispatcher(t)
	q := newStageQueue(t)
	stages := []struct {
		name string
		run  func()
	}{
		{"lookup", func() { reg.Lookup(stageFD, gen) }},
		{"sniff/modbus", func() { sniff.Detect(stageSniffInputs[0].bytes) }},
		{"sniff/http", func() { sniff.Detect(stageSniffInputs[1].bytes) }},
		{"sniff/private", func() { sniff.Detect(stageSniffInputs[2].bytes) }},
		{"pick+release", func() { d.Release(d.Pick(uint8(sniff.Private), route.PatternSteady)) }},
		{"enqueue", func() { q.roundTrip() }},
	}
	for _, s := range stages {
		if n := testing.AllocsPerRun(1000, s.run); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", s.name, n)
		}
	}
}
