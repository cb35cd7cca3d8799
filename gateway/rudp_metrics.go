package gateway

import "github.com/prometheus/client_golang/prometheus"

// The reliable UDP core's sessions in /metrics: how many carry the
// private protocol now, and what the handshakes and the stream layer
// turned away.

var (
	descRUDPSessions = prometheus.NewDesc("edgemux_rudp_sessions", "Sessions of the reliable UDP core carrying the private protocol, open now.", nil, nil)
	descRUDPOpened   = prometheus.NewDesc("edgemux_rudp_sessions_opened_total", "Sessions of the reliable UDP core opened (cookie handshake completed).", nil, nil)
	descRUDPMemory   = prometheus.NewDesc("edgemux_rudp_memory_bytes", "Message buffers the reliable UDP core's sessions hold (rudp.memory_budget bounds it).", nil, nil)
	descRUDPEvents   = prometheus.NewDesc("edgemux_rudp_events_total", "What the reliable UDP core turned away or lost, by event: retries (cookies sent), retries_dropped, bad_cookies, unknown_sessions, malformed, refused (sealed mode, limits), send_errors, panics, bad_input (input past limits.max_input), fragmented (an unreliable datagram with a partial frame).", []string{"event"}, nil)
)

// rudpCollector reports the reliable UDP core at scrape time. Endpoint
// counters are as of each worker's last Tick (a millisecond to 100 ms).
type rudpCollector struct{ g *Gateway }

func (c rudpCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRUDPSessions, descRUDPOpened, descRUDPMemory, descRUDPEvents} {
		ch <- d
	}
}

func (c rudpCollector) Collect(ch chan<- prometheus.Metric) {
	ss, hs := c.g.streams.Stats(), c.g.rudp.Stats()
	ch <- prometheus.MustNewConstMetric(descRUDPSessions, prometheus.GaugeValue, float64(ss.Open))
	ch <- prometheus.MustNewConstMetric(descRUDPOpened, prometheus.CounterValue, float64(ss.Opened))
	ch <- prometheus.MustNewConstMetric(descRUDPMemory, prometheus.GaugeValue, float64(hs.MemoryInUse))
	ep := hs.Endpoints
	for _, e := range []struct {
		name string
		n    uint64
	}{
		{"retries", ep.Retries}, {"retries_dropped", ep.RetriesDropped}, {"bad_cookies", ep.BadCookies},
		{"unknown_sessions", ep.UnknownSessions}, {"malformed", ep.Malformed}, {"refused", ep.Refused},
		{"send_errors", hs.SendErrors}, {"panics", hs.Panics},
		{"bad_input", ss.BadInput}, {"fragmented", ss.Fragmented},
	} {
		ch <- prometheus.MustNewConstMetric(descRUDPEvents, prometheus.CounterValue, float64(e.n), e.name)
	}
}
