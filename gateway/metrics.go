package gateway

import (
	"errors"
	"strconv"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/sniff"
)

// metrics are the gateway's Prometheus series, on a registry of its own so
// that several gateways (tests) never share counters.
type metrics struct {
	reg           *prometheus.Registry
	accepted      prometheus.Counter
	refused       *prometheus.CounterVec
	classifiedN   *prometheus.CounterVec
	classifyTime  *prometheus.HistogramVec
	handed        *prometheus.CounterVec
	closedN       *prometheus.CounterVec
	emfile        prometheus.Counter
	panics        prometheus.Counter
	backpressure  prometheus.Counter
	ringFull      prometheus.Counter
	forwarded     prometheus.Counter
	forwardErrors prometheus.Counter

	tallyMu sync.Mutex
	tally   map[string]uint64 // "protocol action" -> classifications, for Snapshot
}

func newMetrics(g *Gateway) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), tally: map[string]uint64{}}
	f := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgemux", Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	fv := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgemux", Name: name, Help: help}, labels)
		m.reg.MustRegister(c)
		return c
	}
	m.accepted = f("accepted_total", "TCP connections accepted and admitted.")
	m.refused = fv("refused_total", "TCP connections refused at accept, by limit, and admin connections and requests refused, by reason.", "reason")
	m.classifiedN = fv("classified_total", "Connections classified, by protocol and what the routes did with them.", "protocol", "action")
	m.classifyTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "edgemux", Name: "classify_seconds",
		Help:    "Time from accept to classification.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"protocol"})
	m.reg.MustRegister(m.classifyTime)
	m.handed = fv("handed_over_total", "Connections handed to a worker pool.", "protocol", "pool")
	m.closedN = fv("closed_total", "Worker-owned connections closed, by protocol and reason.", "protocol", "reason")
	m.emfile = f("emfile_total", "Accepts that hit the open-file limit (EMFILE/ENFILE).")
	m.panics = f("handler_panics_total", "Handler panics recovered; the connection was closed.")
	m.backpressure = f("backpressure_total", "Writes refused because a peer's output buffer was over its high-water mark.")
	m.ringFull = f("ring_full_total", "Events that found their worker's ring full and waited in the loop's backlog.")
	m.forwarded = f("forwarded_total", "Connections forwarded to a backend.")
	m.forwardErrors = f("forward_errors_total", "Forward routes whose backend could not be reached.")
	m.reg.MustRegister(&stateCollector{g: g}, udpCollector{g: g}, rudpCollector{g: g}, stageCollector{h: g.stages}, northCollector{g: g},
		clusterCollector{g: g},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.zeroSeries(g)
	return m
}

func (m *metrics) classified(p sniff.Proto, action string, ms uint32) {
	m.classifiedN.WithLabelValues(p.String(), action).Inc()
	m.tallyMu.Lock()
	m.tally[p.String()+" "+action]++
	m.tallyMu.Unlock()
	m.classifyTime.WithLabelValues(p.String()).Observe(float64(ms) / 1000)
}

func (m *metrics) handedOver(p sniff.Proto, pool string) {
	m.handed.WithLabelValues(p.String(), pool).Inc()
}

func (m *metrics) closed(p sniff.Proto, reason error) {
	m.closedN.WithLabelValues(p.String(), reasonLabel(reason)).Inc()
}

// reasonLabel keeps the label's values few: known causes by name, the
// rest as "error".
func reasonLabel(err error) string {
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, protocols.ErrPeerClosed):
		return "peer_closed"
	case errors.Is(err, protocols.ErrIdle):
		return "idle"
	case errors.Is(err, protocols.ErrShutdown):
		return "shutdown"
	case errors.Is(err, protocols.ErrMalformed):
		return "malformed"
	case errors.Is(err, protocols.ErrBackpressure):
		return "backpressure"
	case errors.Is(err, protocols.ErrPanic): // the worker's recover (errPanic) or the session's own
		return "panic"
	case errors.Is(err, errInputLimit):
		return "input_limit"
	case errors.Is(err, syscall.ECONNRESET):
		// The peer reset the connection (a client killed, or one that
		// closed with input unread): its doing, not the gateway's error.
		return "peer_reset"
	}
	return "error"
}

// stateCollector reads gauges off the registry, the rings, the bus and the
// quarantine book at scrape time, so the hot paths keep no gauges.
type stateCollector struct{ g *Gateway }

var (
	descConns      = prometheus.NewDesc("edgemux_connections", "Open connections by protocol and state.", []string{"protocol", "state"}, nil)
	descStale      = prometheus.NewDesc("edgemux_stale_events_total", "Events dropped because their (fd, gen) was no longer live.", nil, nil)
	descRing       = prometheus.NewDesc("edgemux_ring_depth", "Events waiting in a worker's rings.", []string{"pool", "worker"}, nil)
	descServed     = prometheus.NewDesc("edgemux_worker_events_total", "Events a worker handled.", []string{"pool", "worker"}, nil)
	descQuarantine = prometheus.NewDesc("edgemux_quarantine_total", "Connections recorded by the quarantine, by reason.", []string{"reason"}, nil)
	descBans       = prometheus.NewDesc("edgemux_quarantine_bans", "Source addresses banned now.", nil, nil)
	descBus        = prometheus.NewDesc("edgemux_bus_messages_total", "Topic bus messages, by what happened.", []string{"event"}, nil)
	descBusGauge   = prometheus.NewDesc("edgemux_bus_size", "Topic bus sizes.", []string{"what"}, nil)
	descForwards   = prometheus.NewDesc("edgemux_forwards_active", "Connections being forwarded now.", nil, nil)
	descSniffing   = prometheus.NewDesc("edgemux_sniffing", "Connections still being classified.", nil, nil)
	descWebSocket  = prometheus.NewDesc("edgemux_websocket_total", "WebSocket handler counters, by event (protocols/websocket Stats).", []string{"event"}, nil)
	descModbus     = prometheus.NewDesc("edgemux_modbus_total", "Modbus server counters, by event (protocols/modbus Stats).", []string{"event"}, nil)
	descPrivate    = prometheus.NewDesc("edgemux_private_total", "Private protocol handler counters, by event (protocols/private Stats).", []string{"event"}, nil)
	descCoAP       = prometheus.NewDesc("edgemux_coap_total", "CoAP handler counters (UDP and TCP), by event (protocols/coap Stats).", []string{"event"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConns, descStale, descRing, descServed, descQuarantine, descBans, descBus, descBusGauge, descForwards, descSniffing, descWebSocket, descModbus, descPrivate, descMbDevice, descMbRTT, descMbDemoted, descMbPoll, descMbPollLast, descMbConnected, descCoAP} {
		ch <- d
	}
	for _, d := range placementDescs {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.g
	counts := g.countConns()
	// Every protocol and state, zeros too (metrics_zero.go).
	for _, p := range allProtos() {
		for st := registry.Sniffing; st <= registry.Closing; st++ {
			ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(counts[p][st]),
				p.String(), st.String())
		}
	}
	ch <- prometheus.MustNewConstMetric(descStale, prometheus.CounterValue, float64(g.reg.Stale()))
	for _, p := range g.pools {
		for i, w := range p.workers {
			ch <- prometheus.MustNewConstMetric(descRing, prometheus.GaugeValue, float64(w.depth()), p.name, strconv.Itoa(i))
			ch <- prometheus.MustNewConstMetric(descServed, prometheus.CounterValue, float64(w.served.Load()), p.name, strconv.Itoa(i))
		}
	}
	collectPlacement(ch, g)
	collectBook(ch, g)
	collectBus(ch, g)
	collectCounters(ch, descWebSocket, g.ws.Stats().Counters())
	collectCounters(ch, descModbus, g.mb.Stats().Counters())
	collectModbusDevices(ch, g)
	collectCounters(ch, descPrivate, g.priv.Stats().Counters())
	collectCounters(ch, descCoAP, g.coap.Stats().Counters())
	ch <- prometheus.MustNewConstMetric(descForwards, prometheus.GaugeValue, float64(g.fwd.active.Load()))
	ch <- prometheus.MustNewConstMetric(descSniffing, prometheus.GaugeValue, float64(g.limits.stillSniffing()))
}

// collectCounters reports a handler's counters as one series each, by event.
func collectCounters(ch chan<- prometheus.Metric, desc *prometheus.Desc, cs []protocols.Counter) {
	for _, c := range cs {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(c.N), c.Name)
	}
}

func collectBook(ch chan<- prometheus.Metric, g *Gateway) {
	st := g.book.Stats()
	for reason, n := range st.Reasons {
		ch <- prometheus.MustNewConstMetric(descQuarantine, prometheus.CounterValue, float64(n), string(reason))
	}
	ch <- prometheus.MustNewConstMetric(descBans, prometheus.GaugeValue, float64(st.BansActive))
}

func collectBus(ch chan<- prometheus.Metric, g *Gateway) {
	st := g.bus.Stats()
	for _, v := range []struct {
		name string
		n    uint64
	}{
		{"published", st.Published}, {"rejected", st.Rejected}, {"cache_full", st.CacheFull}, {"over_quota", st.OverQuota},
		{"delivered", st.Delivered}, {"dropped", st.Dropped}, {"disconnected", st.Disconnected},
	} {
		ch <- prometheus.MustNewConstMetric(descBus, prometheus.CounterValue, float64(v.n), v.name)
	}
	ch <- prometheus.MustNewConstMetric(descBusGauge, prometheus.GaugeValue, float64(st.Subscribers), "subscribers")
	ch <- prometheus.MustNewConstMetric(descBusGauge, prometheus.GaugeValue, float64(st.Topics), "topics")
	ch <- prometheus.MustNewConstMetric(descBusGauge, prometheus.GaugeValue, float64(st.Reserved), "reserved")
}

// classifications copies the classification tally: "protocol action" -> n.
func (m *metrics) classifications() map[string]uint64 {
	m.tallyMu.Lock()
	defer m.tallyMu.Unlock()
	out := make(map[string]uint64, len(m.tally))
	for k, v := range m.tally {
		out[k] = v
	}
	return out
}
