package gateway

// Per-stage cost of the path an event takes through the gateway, on the
// same stages as seed 002's table (registry lookup, sniff, route,
// enqueue, wake), each through the functions production calls.
// examples/bench/stages.sh runs them and prints the figures next to the
// seed's. Run by hand:
//
//	go test -run='^$' -bench=BenchmarkStage -benchmem ./gateway/
//
// Lookup, sniff and route are one-goroutine operations: what one call
// costs. Enqueue and wake cross goroutines as production does: the
// benchmark goroutine stands in for the epoll loop and calls the loop's
// own deliver, and the real worker goroutine (stagebed_test.go) takes the
// events. Nothing here asserts a duration; TestStagesDoNotAllocate
// asserts the zero-allocation claims.

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/route"
	"github.com/edgemux/edgemux/sniff"
)

// stageFD is the descriptor the one-goroutine stages pretend to serve.
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

// stageRegistry returns a registry with stageFD open and classified, and
// its generation; the slot has taken a few events over half a second, as
// a steady connection's has.
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
	for i := range uint32(6) {
		reg.Post(stageFD, gen, registry.EvRead)
		reg.Take(stageFD, gen, 1+100*i)
	}
	return reg, gen
}

// stagePool is the private pool of a gateway built by New (nothing
// started), with four workers under the default entropy policy.
func stagePool(tb testing.TB) *pool {
	tb.Helper()
	cfg, err := config.Parse(config.DefaultYAML)
	if err != nil {
		tb.Fatal(err)
	}
	pc := cfg.Pools["private"]
	pc.Workers = 4
	cfg.Pools["private"] = pc
	g, err := New(cfg, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return g.byPool["private"]
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

// BenchmarkStageRoute is what the pool's dispatcher costs: once per
// connection the loop's pool.pick (in handOff, with its history lookup)
// and the worker's unplace (at close, recording the history); on every
// event the worker's learn (in handle), which updates the connection's
// profile and the worker's class bitmap.
func BenchmarkStageRoute(b *testing.B) {
	p := stagePool(b)
	c := routeStageConn()
	b.Run("pick+release", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w, _ := p.pick(sniff.Private, c.Peer().Addr())
			if w < 0 {
				b.Fatal("no worker")
			}
			p.workers[w].unplace(c)
		}
	})
	b.Run("observe", func(b *testing.B) {
		reg, gen := stageRegistry(b)
		s := reg.Lookup(stageFD, gen)
		b.ReportAllocs()
		for i := uint32(0); b.Loop(); i++ {
			p.workers[0].learn(c, s, i)
		}
	})
}

// routeStageConn is a connection as the route stage sees it: a peer and a
// protocol, and a profile that learns.
func routeStageConn() *conn {
	return newConn(nil, 0, 0, netip.MustParseAddrPort("192.0.2.7:40000"), sniff.Private, 0)
}

// stageBatch is how many events the enqueue benchmark's stand-in loop
// hands over per batch, one for each of as many connections: a quarter of
// an epoll_wait batch (maxEvents).
const stageBatch = 64

// BenchmarkStageEnqueue hands events from the loop to a running worker:
// the benchmark goroutine, as the loop after epoll_wait, calls l.deliver
// (registry.Post, ring push, Unpark) with EvRead for each of stageBatch
// connections, then does what the loop does at the end of a batch; the
// real worker goroutine takes each event (registry.Take, pool.observe,
// one read(2) to EAGAIN). The next batch waits until the worker took the
// last one (yielding, as the loop waits in epoll_wait), so every deliver
// is a real handoff, never coalesced into a queued one.
//
// ns/op is wall time per event, from the first deliver to the worker's
// last take, waits included: the whole handoff, about what the slower
// side (the worker, whose read is a system call) spends per event.
// loop-ns/event is the loop's own share: the time spent in deliver while
// the worker takes the batch's first events on the other core. wakes/op
// is how often the worker was asleep and had to be unparked.
func BenchmarkStageEnqueue(b *testing.B) {
	bed := newStageBed(b, stageBatch, nil)
	pk := bed.w.park
	wakes := pk.Stats().Wakes
	var inLoop time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for n := b.N; n > 0; n -= stageBatch {
		inLoop += bed.enqueue(min(n, stageBatch))
	}
	bed.awaitTaken()
	b.StopTimer()
	b.ReportMetric(float64(inLoop.Nanoseconds())/float64(b.N), "loop-ns/event")
	b.ReportMetric(float64(pk.Stats().Wakes-wakes)/float64(b.N), "wakes/op")
}

// enqueue waits until the worker took every event handed to it so far,
// then hands it one EvRead for each of the first n connections, sampling
// stage times as the loop does, and ends the batch as the loop does. It
// returns the time spent in deliver.
func (b *stageBed) enqueue(n int) time.Duration {
	b.awaitTaken()
	start := time.Now()
	// The stage sampling as loop.run does it (admin.stage_sample, 128
	// in the bed's default config): the figures include its cost.
	sample := b.l.st.batch(n)
	for i := range n {
		c := &b.conns[i]
		if i == sample {
			b.l.st.begin()
			sample = b.l.st.next(i, n)
			b.l.st.mark(stLookup)
		}
		b.l.deliver(c.fd, c.gen, c.slot, registry.EvRead)
		b.l.st.on = false
	}
	spent := time.Since(start)
	b.handed += uint64(n)
	b.endBatch()
	return spent
}

// awaitTaken yields until the worker has taken every event handed to it.
func (b *stageBed) awaitTaken() {
	for b.w.served.Load() < b.handed {
		runtime.Gosched()
	}
}

// BenchmarkStageReadAgain is the system call that ends every read of an
// event on the worker: readFD on a socket with nothing (left) to read,
// which says EAGAIN. The enqueue pipeline pays it once per event.
func BenchmarkStageReadAgain(b *testing.B) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	buf := make([]byte, readBufSize)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readFD(fds[0], buf); err != errAgain {
			b.Fatalf("read: %v, want EAGAIN", err)
		}
	}
}

// stageSettle lets a parked worker's goroutine really go to sleep before
// the loop wakes it, so the figure is a wake and not a spin; it is also
// how long the stand-in loop blocks after a wake, as in epoll_wait.
const stageSettle = 50 * time.Microsecond

// stageSleeper is one way a sleeping worker gets its event.
type stageSleeper struct {
	name string
	make func(testing.TB) route.Sleeper // nil: the gateway's default
	lend bool                           // dispatch.lend_below as by default; otherwise 0, so every event is a wake
}

// wakeBed is a one-connection bed whose worker sleeps as sl says.
func (sl stageSleeper) wakeBed(tb testing.TB) *stageBed {
	var s route.Sleeper
	if sl.make != nil {
		s = sl.make(tb)
	}
	return newStageBedWith(tb, 1, s, func(cfg *config.Config) {
		if !sl.lend {
			cfg.Dispatch.LendBelow = 0
		}
	})
}

// stageSleepers are the wake primitives the worker's Parker can sleep on,
// and the lent turn that replaces the wake for a cheap sleeping worker.
var stageSleepers = []stageSleeper{
	{"chan", nil, false},
	{"eventfd", func(tb testing.TB) route.Sleeper {
		e, err := route.NewEventfdParker()
		if err != nil {
			tb.Skip(err)
		}
		return e
	}, false},
	{"lent", nil, true},
}

// BenchmarkStageWake reports the latency (p50/p99, ns) from the loop's
// deliver to the worker's session receiving the event, with the worker
// asleep: the real worker goroutine parked in its run loop
// (Park(ready, workerTick) with the configured spin), woken by l.deliver,
// then Take, read(2) and Session.Data. The stand-in loop then behaves as
// loop.run does after a wake: one runtime.Gosched, then a blocking
// syscall. Sub-benchmarks: the default channel sleeper and an eventfd,
// with lent turns off; and "lent", the default, where the loop runs the
// sleeping worker's turn itself once its cost is sampled (the first
// events of a run are still wakes).
// ns/op is hidden: it is mostly the settle time that makes every wake a
// real sleep.
func BenchmarkStageWake(b *testing.B) {
	for _, sl := range stageSleepers {
		b.Run(sl.name, func(b *testing.B) {
			bed := sl.wakeBed(b)
			lat := make([]int64, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			bed.measureWake(b, lat)
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(stagePercentile(lat, 50)), "p50-ns")
			b.ReportMetric(float64(stagePercentile(lat, 99)), "p99-ns")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// measureWake runs len(lat) wakes of the parked worker through the bed's
// first connection and fills lat with each one's latency in nanoseconds.
func (b *stageBed) measureWake(tb testing.TB, lat []int64) {
	c := &b.conns[0]
	one := []byte{1}
	for i := range lat {
		data := b.seen.data.Load()
		for !b.parked() {
			runtime.Gosched()
		}
		for t := time.Now(); time.Since(t) < stageSettle; {
			runtime.Gosched()
		}
		if _, err := unix.Write(c.peer, one); err != nil {
			tb.Fatal(err)
		}
		sent := int64(time.Since(b.seen.base))
		b.l.deliver(c.fd, c.gen, c.slot, registry.EvRead)
		b.endBatch()
		stageRawSleep()
		for b.seen.data.Load() == data {
			runtime.Gosched()
		}
		lat[i] = b.seen.last.Load() - sent
	}
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
	p := stagePool(t)
	seen := map[int]bool{}
	for range 8 {
		w, _ := p.pick(sniff.Private, netip.Addr{})
		seen[w] = true
		p.workers[w].unplace(&conn{proto: sniff.Private})
	}
	if len(seen) != 4 {
		t.Errorf("entropy spread idle picks over %d workers, want 4", len(seen))
	}
	t.Run("enqueue", testStageEnqueue)
	t.Run("wake", func(t *testing.T) {
		for _, sl := range stageSleepers {
			t.Run(sl.name, func(t *testing.T) { testStageWake(t, sl) })
		}
	})
}

// testStageEnqueue: every deliver of the enqueue benchmark is one handoff
// that the worker takes: one Take per event and connection, nothing left
// in the ring or the backlog.
func testStageEnqueue(t *testing.T) {
	bed := newStageBed(t, stageBatch, nil)
	before := make([]uint32, stageBatch)
	for i, c := range bed.conns {
		before[i] = c.slot.Events()
	}
	const batches = 5
	for range batches {
		bed.enqueue(stageBatch)
	}
	bed.awaitTaken()
	for i, c := range bed.conns {
		if got := c.slot.Events() - before[i]; got != batches {
			t.Errorf("connection %d: the worker took %d events, want %d", i, got, batches)
		}
	}
	if n := bed.w.served.Load(); n != bed.handed {
		t.Errorf("worker served %d events, %d handed over", n, bed.handed)
	}
	if n := bed.l.rings[bed.w.idx].Len(); n != 0 || bed.l.hasBacklog() {
		t.Errorf("ring holds %d events (backlog %v) after the worker took all", n, bed.l.hasBacklog())
	}
}

// testStageWake: each wake of the wake benchmark reaches the session with
// the byte written for it (measureWake delivers only to a parked worker).
func testStageWake(t *testing.T, sl stageSleeper) {
	bed := sl.wakeBed(t)
	lat := make([]int64, 20)
	bed.measureWake(t, lat)
	for i, l := range lat {
		if l <= 0 {
			t.Fatalf("wake %d: latency %d ns", i, l)
		}
	}
	if n := bed.seen.data.Load(); n != int64(len(lat)) {
		t.Errorf("sessions got %d Data calls, want %d", n, len(lat))
	}
}

// TestStagesDoNotAllocate asserts the zero-allocation claim of every stage
// but the wake. testing.AllocsPerRun counts the whole process, so the
// enqueue case covers the loop's deliver and the worker's take and read.
func TestStagesDoNotAllocate(t *testing.T) {
	reg, gen := stageRegistry(t)
	s := reg.Lookup(stageFD, gen)
	p := stagePool(t)
	c := routeStageConn()
	now := uint32(0)
	bed := newStageBed(t, stageBatch, nil)
	stages := []struct {
		name string
		run  func()
	}{
		{"lookup", func() { reg.Lookup(stageFD, gen) }},
		{"sniff/modbus", func() { sniff.Detect(stageSniffInputs[0].bytes) }},
		{"sniff/http", func() { sniff.Detect(stageSniffInputs[1].bytes) }},
		{"sniff/private", func() { sniff.Detect(stageSniffInputs[2].bytes) }},
		{"pick+release", func() { w, _ := p.pick(sniff.Private, c.Peer().Addr()); p.workers[w].unplace(c) }},
		{"observe", func() { now++; p.workers[0].learn(c, s, now) }},
		{"enqueue", func() { bed.enqueue(stageBatch); bed.awaitTaken() }},
	}
	for _, st := range stages {
		if n := testing.AllocsPerRun(1000, st.run); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", st.name, n)
		}
	}
}
