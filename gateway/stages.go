package gateway

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stage timestamps: where an event's time goes on the live gateway, on the
// seven stages of the C reference's table (examples/bench/stages.sh), sampled so the cost stays small.
//
// One event in admin.stage_sample is followed from epoll_wait's return to
// its handler. The loop decides which: each epoll_wait batch takes its
// count off a countdown, and the events on which the countdown runs out
// are sampled; only a batch that holds one reads the clock at epoll_wait's
// return.
// While the loop serves the sampled event, each stage it passes reads the
// monotonic clock once and records the time since the previous mark. The
// handoff carries the sample to the worker in the slot's pending bits
// (evSampled) with the post time in stageAt[fd]; the worker records the
// wake and the handler. Every other event pays one compare per event in the
// loop and one bit test per event in the worker.
//
// The stages, each a duration:
//
//	epoll_wait       epoll_wait's return to the loop taking up this event
//	                 (the events ahead of it in the batch)
//	registry_lookup  Registry.Lookup and the generation check
//	sniff            MSG_PEEK and the detectors (new connections only)
//	route            the routes and the pool's dispatcher pick, the
//	                 registry's Classify (new connections only)
//	enqueue          registry.Post and the ring push
//	wake             the post to the worker's Take: ring transit, unpark,
//	                 scheduling; under the inline policy the direct call
//	handler          the session's Data calls for the event's input
//
// An event posted while an earlier one of its connection is still queued
// merges into it (registry.Post); a sample that merges so measures the
// wake from the later post. Datagrams (UDP batches) are not sampled here.

// stage names one of the seven stages.
type stage uint8

const (
	stEpoll stage = iota
	stLookup
	stSniff
	stRoute
	stEnqueue
	stWake
	stHandler
	numStages
)

// stageNames are the values of edgemux_stage_seconds' stage label.
var stageNames = [numStages]string{
	"epoll_wait", "registry_lookup", "sniff", "route", "enqueue", "wake", "handler",
}

// evSampled marks a sampled event in the registry slot's pending bits:
// the top bit of the byte that holds registry's Ev* bits (0-4). Bits 8-15
// carry an EvOpen's quarantine reason and 16-31 its placement seed
// (seedBits); it once sat at bit 16, where every bursty or long-period
// seed read as a sample and a sampled open lost its pattern.
const evSampled uint32 = 1 << 7

// stageBucketsNs are the histogram's upper bounds in nanoseconds: the
// cheap stages take tens of nanoseconds, a slow handler milliseconds.
var stageBucketsNs = [...]int64{
	50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000,
	100_000, 250_000, 1_000_000, 5_000_000, 25_000_000, 100_000_000,
}

// stageHist counts the samples of every stage in fixed buckets; loops and
// workers observe into it at once, so its fields are atomics.
type stageHist struct {
	counts [numStages][len(stageBucketsNs) + 1]atomic.Uint64 // the last: above every bound
	sumNs  [numStages]atomic.Int64
}

func (h *stageHist) observe(s stage, ns int64) {
	if ns < 0 {
		ns = 0 // a stamp from another CPU's clock read may land a hair late
	}
	i := 0
	for i < len(stageBucketsNs) && ns > stageBucketsNs[i] {
		i++
	}
	h.counts[s][i].Add(1)
	h.sumNs[s].Add(ns)
}

// stageClock is one goroutine's sampler: the loop's or a worker's.
type stageClock struct {
	start time.Time // the gateway's start: marks are monotonic ns since it
	hist  *stageHist
	every int   // sample one event in every; 0: never
	left  int   // events until the next sample (the loop's countdown)
	on    bool  // the event being served is sampled
	last  int64 // the previous mark

	batchAt int64 // when the batch holding the sample came back from epoll_wait
}

func newStageClock(g *Gateway) stageClock {
	every := g.cfg.Admin.StageSample
	return stageClock{start: g.start, hist: g.stages, every: every, left: every}
}

func (c *stageClock) now() int64 { return int64(time.Since(c.start)) }

// batch takes an epoll_wait batch of n events off the countdown and returns
// the index of the first event to sample in it, or -1 (next gives the
// others); only a batch that holds one reads the clock.
func (c *stageClock) batch(n int) int {
	if c.every == 0 || n <= 0 { // n < 0: epoll_wait failed (EINTR)
		return -1
	}
	if n < c.left {
		c.left -= n
		return -1
	}
	i := c.left - 1
	c.left = c.every - (n-1-i)%c.every // the events after the batch's last sample count on
	c.batchAt = c.now()
	return i
}

// next returns the index of the batch's sample after i, or -1.
func (c *stageClock) next(i, n int) int {
	if i += c.every; i < n {
		return i
	}
	return -1
}

// begin starts following the sampled event: its epoll_wait stage ends.
func (c *stageClock) begin() {
	c.on = true
	c.last = c.batchAt
	c.mark(stEpoll)
}

// mark ends stage s now; the next stage starts here.
func (c *stageClock) mark(s stage) {
	t := c.now()
	c.hist.observe(s, t-c.last)
	c.last = t
}

// beginSample records a sampled event's wake: from the loop's post to now.
func (w *worker) beginSample(fd int) {
	now := w.st.now()
	w.st.hist.observe(stWake, now-w.g.stageAt[fd].Load())
	w.st.on = true
	w.handlerNs = -1
}

// endSample records the sampled event's handler time, if a session was
// given input.
func (w *worker) endSample() {
	if w.handlerNs >= 0 {
		w.st.hist.observe(stHandler, w.handlerNs)
	}
	w.st.on = false
}

// StageStats is one stage's samples in /api/stats: the count, the mean and
// the histogram's upper bounds at the 50th, 99th and 99.9th percentile
// (0 before the first sample; -1 above the largest bound).
type StageStats struct {
	Count  uint64 `json:"count"`
	MeanNs int64  `json:"mean_ns"`
	P50Ns  int64  `json:"p50_ns"`
	P99Ns  int64  `json:"p99_ns"`
	P999Ns int64  `json:"p999_ns"`
}

// snapshot reads every stage's samples, for /api/stats.
func (h *stageHist) snapshot() map[string]StageStats {
	out := make(map[string]StageStats, numStages)
	for s := range numStages {
		var counts [len(stageBucketsNs) + 1]uint64
		var n uint64
		for i := range counts {
			counts[i] = h.counts[s][i].Load()
			n += counts[i]
		}
		st := StageStats{Count: n}
		if n > 0 {
			st.MeanNs = h.sumNs[s].Load() / int64(n)
			st.P50Ns = bucketAt(counts[:], n, 500)
			st.P99Ns = bucketAt(counts[:], n, 990)
			st.P999Ns = bucketAt(counts[:], n, 999)
		}
		out[stageNames[s]] = st
	}
	return out
}

// bucketAt returns the upper bound of the bucket holding the per-mille-th
// sample, -1 for the bucket above every bound.
func bucketAt(counts []uint64, n uint64, perMille uint64) int64 {
	rank := (n*perMille + 999) / 1000
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank && i < len(stageBucketsNs) {
			return stageBucketsNs[i]
		}
		if seen >= rank {
			break
		}
	}
	return -1
}

var descStage = prometheus.NewDesc("edgemux_stage_seconds",
	"Sampled time an event spends in each stage from epoll_wait to its handler (one event in admin.stage_sample).",
	[]string{"stage"}, nil)

// stageCollector reports the stage histogram, every stage from start-up.
type stageCollector struct{ h *stageHist }

func (c stageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descStage }

func (c stageCollector) Collect(ch chan<- prometheus.Metric) {
	for s := range numStages {
		buckets := make(map[float64]uint64, len(stageBucketsNs))
		var cum uint64
		for i, ub := range stageBucketsNs {
			cum += c.h.counts[s][i].Load()
			buckets[float64(ub)/1e9] = cum
		}
		cum += c.h.counts[s][len(stageBucketsNs)].Load()
		sum := float64(c.h.sumNs[s].Load()) / 1e9
		ch <- prometheus.MustNewConstHistogram(descStage, cum, sum, buckets, stageNames[s])
	}
}
