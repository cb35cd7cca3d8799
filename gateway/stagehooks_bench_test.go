package gateway

// What the stage timestamps (stages.go) cost. Run by hand:
//
//	go test -run='^$' -bench='BenchmarkStage(Hooks|Sampling)' ./gateway/
//
// BenchmarkStageHooks is the whole price of one sampled event, loop and
// worker side: hooks-ns/sampled divided by admin.stage_sample is what
// sampling adds to every event. BenchmarkStageSampling runs the enqueue
// pipeline (BenchmarkStageEnqueue's) with sampling off, at the default and
// at every event, to show the same from the outside. Nothing asserts a
// duration.

import (
	"fmt"
	"testing"
)

// BenchmarkStageHooks runs every hook a sampled event passes: the loop's
// countdown and clock read at epoll_wait's return, its marks (epoll_wait,
// lookup, sniff, route, enqueue) and the post time, the worker's wake and
// handler records. It calls the functions the loop and worker call, on a
// gateway built by New.
func BenchmarkStageHooks(b *testing.B) {
	g, err := New(testConfig(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	l := newLoop(g, 0)
	w := g.byPool["private"].workers[0]
	l.st.every, l.st.left = 1, 1
	b.ReportAllocs()
	for b.Loop() {
		if l.st.batch(1) != 0 {
			b.Fatal("no sample")
		}
		l.st.begin()
		l.st.mark(stLookup)
		l.st.mark(stSniff)
		l.st.mark(stRoute)
		g.stageAt[stageFD].Store(l.st.now())
		l.st.mark(stEnqueue)
		l.st.on = false
		w.beginSample(stageFD)
		t0 := w.st.now()
		w.handlerNs = max(w.handlerNs, 0) + w.st.now() - t0
		w.endSample()
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns, "hooks-ns/sampled")
	b.ReportMetric(ns/float64(g.cfg.Admin.StageSample), "ns/event@default")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkStageSampling: the enqueue pipeline's ns/op per event with
// sampling off, at the default period and at every event.
func BenchmarkStageSampling(b *testing.B) {
	for _, every := range []int{0, 128, 16, 1} {
		b.Run(fmt.Sprintf("every=%d", every), func(b *testing.B) {
			bed := newStageBed(b, stageBatch, nil)
			bed.l.st.every, bed.l.st.left = every, every
			sampled := bed.g.stages.snapshot()["enqueue"].Count
			b.ReportAllocs()
			b.ResetTimer()
			for n := b.N; n > 0; n -= stageBatch {
				bed.enqueue(min(n, stageBatch))
			}
			bed.awaitTaken()
			b.StopTimer()
			b.ReportMetric(float64(bed.g.stages.snapshot()["enqueue"].Count-sampled), "samples")
		})
	}
}

// TestStageSamplingCounts: the bed's loop samples one event in every, and
// each sample reaches the worker as a wake: the benchmark above measures
// what it says.
func TestStageSamplingCounts(t *testing.T) {
	bed := newStageBed(t, stageBatch, nil)
	const every = 16
	bed.l.st.every, bed.l.st.left = every, every
	before := bed.g.stages.snapshot()
	const batches = 10
	for range batches {
		bed.enqueue(stageBatch)
	}
	bed.awaitTaken()
	after := bed.g.stages.snapshot()
	want := uint64(batches * stageBatch / every)
	// No handler: the bed's sockets hold nothing to read.
	for _, name := range []string{"epoll_wait", "registry_lookup", "enqueue", "wake"} {
		if got := after[name].Count - before[name].Count; got != want {
			t.Errorf("%s: %d samples in %d events, want %d", name, got, batches*stageBatch, want)
		}
	}
}
