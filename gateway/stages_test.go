package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/route"
)

// TestStageClockSamplesEveryNth: the loop's countdown samples exactly the
// events numbered every, 2*every, ... across batches of any size, several
// in a batch larger than the period.
func TestStageClockSamplesEveryNth(t *testing.T) {
	for _, every := range []int{1, 3, 8, 128} {
		c := stageClock{every: every, left: every, hist: &stageHist{}}
		var sampled []int
		total := 0
		sizes := []int{1, 2, 3, 5, 7, 1, 8, 4, 6, 64, 256, 9}
		for i := range 600 {
			n := sizes[i%len(sizes)]
			for k := c.batch(n); k >= 0; k = c.next(k, n) {
				if k >= n {
					t.Fatalf("every %d: batch of %d sampled index %d", every, n, k)
				}
				sampled = append(sampled, total+k+1)
			}
			total += n
		}
		if len(sampled) != total/every {
			t.Errorf("every %d: %d samples in %d events, want %d", every, len(sampled), total, total/every)
		}
		for i, ev := range sampled {
			if ev != (i+1)*every {
				t.Errorf("every %d: sample %d was event %d, want %d", every, i, ev, (i+1)*every)
				break
			}
		}
	}
	off := stageClock{hist: &stageHist{}}
	for range 100 {
		if k := off.batch(64); k != -1 {
			t.Fatalf("sampling off picked index %d", k)
		}
	}
}

// TestStageHistPercentiles: the /api/stats figures are the bounds of the
// buckets that hold the 50th, 99th and 99.9th sample.
func TestStageHistPercentiles(t *testing.T) {
	var h stageHist
	for range 990 {
		h.observe(stWake, 80) // the 100 ns bucket
	}
	for range 9 {
		h.observe(stWake, 3_000) // 5 us
	}
	h.observe(stWake, 1e9) // above every bound
	h.observe(stRoute, -5) // a negative difference counts as 0
	st := h.snapshot()
	w := st["wake"]
	if w.Count != 1000 || w.P50Ns != 100 || w.P99Ns != 100 || w.P999Ns != 5_000 {
		t.Errorf("wake: %+v, want count 1000, p50 100, p99 100, p99.9 5000", w)
	}
	if w.MeanNs != (990*80+9*3000+1_000_000_000)/1000 {
		t.Errorf("wake mean %d", w.MeanNs)
	}
	if r := st["route"]; r.Count != 1 || r.P50Ns != 50 {
		t.Errorf("route: %+v, want one sample in the first bucket", r)
	}
	h.observe(stHandler, 1e9)
	if got := h.snapshot()["handler"].P50Ns; got != -1 {
		t.Errorf("handler p50 %d, want -1 (above every bound)", got)
	}
	if len(st) != int(numStages) {
		t.Errorf("%d stages in the snapshot, want %d", len(st), numStages)
	}
}

// TestStagesAtStartup: the histogram family is in /metrics and /api/stats
// with every stage at zero before any traffic.
func TestStagesAtStartup(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	page := httpGet(t, g, "/metrics")
	for _, name := range stageNames {
		for _, want := range []string{
			fmt.Sprintf(`edgemux_stage_seconds_count{stage="%s"} 0`, name),
			fmt.Sprintf(`edgemux_stage_seconds_bucket{stage="%s",le="+Inf"} 0`, name),
		} {
			if !strings.Contains(page, "\n"+want+"\n") {
				t.Errorf("no %s at start-up", want)
			}
		}
	}
	st := apiStats(t, g)
	if st.StageSample != 128 || len(st.Stages) != int(numStages) {
		t.Fatalf("/api/stats: stage_sample %d, %d stages; want 128 and %d", st.StageSample, len(st.Stages), numStages)
	}
}

// TestEventBitsApart: a sampled event's mark, the registry's event bits,
// an EvOpen's quarantine reason and its placement seed each have bits of
// their own, so none reads as another.
func TestEventBitsApart(t *testing.T) {
	events := registry.EvRead | registry.EvWrite | registry.EvHup | registry.EvOpen | registry.EvProbe
	reason := uint32(0xff) << 8
	seed := seedBits(route.PatternLongPeriod, maxSeedWeight)
	fields := []uint32{evSampled, events, reason, seed}
	for i := range fields {
		for j := range i {
			if fields[i]&fields[j] != 0 {
				t.Errorf("event bit fields %d and %d overlap: %#x & %#x", j, i, fields[j], fields[i])
			}
		}
	}
	if pat, w := seedOf(seed | evSampled | events | reason); pat != route.PatternLongPeriod || w != maxSeedWeight {
		t.Errorf("seed read back from a sampled open: %v %d, want %v %d", pat, w, route.PatternLongPeriod, maxSeedWeight)
	}
}

// TestStagesUnderLoad drives private connections through the live gateway
// with every event sampled and finds each of the seven stages measured,
// the route once per connection handed over, under every dispatch policy;
// with sampling off the same traffic leaves every stage at zero.
func TestStagesUnderLoad(t *testing.T) {
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Dispatch.Policy = policy
			cfg.Admin.StageSample = 1
			g := startGateway(t, cfg, Options{})
			const conns = 12
			stageTraffic(t, g, conns, 5)
			var st Stats
			eventually(t, "a sample of every stage", func() bool {
				st = apiStats(t, g)
				for _, name := range stageNames {
					if st.Stages[name].Count == 0 {
						return false
					}
				}
				return true
			})
			t.Logf("%s: %+v", policy, st.Stages)
			if n := st.Stages["route"].Count; n != conns {
				t.Errorf("route sampled %d times with every event sampled, want %d (one per connection)", n, conns)
			}
			if e, l := st.Stages["epoll_wait"].Count, st.Stages["registry_lookup"].Count; l > e {
				t.Errorf("registry_lookup sampled %d times, more than epoll_wait's %d", l, e)
			}
			if e, w := st.Stages["enqueue"].Count, st.Stages["wake"].Count; w > e {
				t.Errorf("wake sampled %d times, more than enqueue's %d", w, e)
			}
			page := httpGet(t, g, "/metrics")
			for _, name := range stageNames {
				v := metric(page, fmt.Sprintf(`edgemux_stage_seconds_count{stage="%s"}`, name))
				if n, err := strconv.ParseUint(v, 10, 64); err != nil || n == 0 {
					t.Errorf("/metrics: stage %s count %q, want > 0", name, v)
				}
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.Admin.StageSample = 0
		p := cfg.Pools["private"]
		p.Pattern = "long-period" // a seed with the pattern's low bit set
		cfg.Pools["private"] = p
		g := startGateway(t, cfg, Options{})
		stageTraffic(t, g, 12, 5)
		st := apiStats(t, g)
		if st.StageSample != 0 {
			t.Errorf("stage_sample %d, want 0", st.StageSample)
		}
		for name, s := range st.Stages {
			if s.Count != 0 {
				t.Errorf("sampling off: stage %s has %d samples", name, s.Count)
			}
		}
	})
}

// stageTraffic opens conns private connections, each publishing pubs
// acknowledged messages, and closes them.
func stageTraffic(t *testing.T, g *Gateway, conns, pubs int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range conns {
		c, err := private.Dial(ctx, g.Addr().String(), fmt.Sprintf("stage-%d", i), private.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for j := range pubs {
			if err := c.Publish(fmt.Sprintf("stage/%d", i), []byte{byte(j)}, true); err != nil {
				t.Fatalf("connection %d publish %d: %v", i, j, err)
			}
		}
		c.Close()
	}
}

func apiStats(t *testing.T, g *Gateway) Stats {
	t.Helper()
	var st Stats
	if err := json.Unmarshal([]byte(httpGet(t, g, "/api/stats")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}
