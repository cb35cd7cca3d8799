package gateway

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// What placement knows, for /metrics: the work each worker is counted for
// (what Pick compares), the time it actually spent working (each poll
// turn that found work, timed), the turns loops ran for it, and the
// history table's counters per pool.
var (
	descWork = prometheus.NewDesc("edgemux_worker_work",
		"Work the dispatcher counts for a worker: the sum of its connections' weights, in units of 1 ms of handler time per second (at least 1 per connection).",
		[]string{"pool", "worker"}, nil)
	descBusy = prometheus.NewDesc("edgemux_worker_busy_seconds_total",
		"Wall time a worker spent in turns that found work (reading, handling, writing), each turn timed.",
		[]string{"pool", "worker"}, nil)
	descLent = prometheus.NewDesc("edgemux_lent_turns_total",
		"Worker turns a loop ran itself because the worker slept and its handlers were cheap (dispatch.lend_below).",
		[]string{"pool", "worker"}, nil)
	descHistory = prometheus.NewDesc("edgemux_placement_history_total",
		"Placement history lookups (hit, miss) and evictions per pool.",
		[]string{"pool", "event"}, nil)
	descHistoryLen = prometheus.NewDesc("edgemux_placement_history_sources",
		"Source addresses whose class the pool's placement history remembers.",
		[]string{"pool"}, nil)
	placementDescs = []*prometheus.Desc{descWork, descBusy, descLent, descHistory, descHistoryLen}
)

func collectPlacement(ch chan<- prometheus.Metric, g *Gateway) {
	for _, p := range g.pools {
		for i, w := range p.workers {
			id := strconv.Itoa(i)
			ch <- prometheus.MustNewConstMetric(descWork, prometheus.GaugeValue, float64(p.disp.Work(i)), p.name, id)
			ch <- prometheus.MustNewConstMetric(descBusy, prometheus.CounterValue, float64(w.busyNs.Load())/1e9, p.name, id)
			ch <- prometheus.MustNewConstMetric(descLent, prometheus.CounterValue, float64(w.park.Stats().Lends), p.name, id)
		}
		if p.history == nil {
			continue
		}
		st := p.history.Stats()
		ch <- prometheus.MustNewConstMetric(descHistory, prometheus.CounterValue, float64(st.Hits), p.name, "hit")
		ch <- prometheus.MustNewConstMetric(descHistory, prometheus.CounterValue, float64(st.Misses), p.name, "miss")
		ch <- prometheus.MustNewConstMetric(descHistory, prometheus.CounterValue, float64(st.Evictions), p.name, "eviction")
		ch <- prometheus.MustNewConstMetric(descHistoryLen, prometheus.GaugeValue, float64(st.Len), p.name)
	}
}
