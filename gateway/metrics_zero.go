package gateway

import (
	"github.com/edgemux/edgemux/sniff"
)

// A series that appears only after its first event cannot be alerted on
// (rate() of a missing series is no data, not zero) and leaves gaps in
// dashboards. So every labelled family is created at zero when the
// gateway is built, for the label values it can know up front: the
// protocols, the pools and what they take, the routes, and the reasons in
// the lists below. The collectors that read state at scrape time
// (stateCollector, udpCollector, ...) report their fixed label sets
// whole, zeros included.

// refusedReasons are the reason labels of edgemux_refused_total: the
// admission limits (admission.go), the registry being full
// (accept_linux.go), and the admin server's refusals (access_conns.go,
// admin.go). A new reason belongs here too.
var refusedReasons = []string{
	"max_conns", "max_sniffing", "max_conns_per_ip", "max_sniffing_per_ip",
	"registry",
	"admin_max_conns", "admin_max_conns_per_ip", "admin_idle_reclaimed",
	"admin_disabled", "admin_busy", "admin_forbidden", "admin_unauthorized",
}

// closedReasons are reasonLabel's values.
var closedReasons = []string{
	"none", "peer_closed", "peer_reset", "idle", "shutdown", "malformed", "backpressure", "panic", "input_limit", "error",
}

// allProtos lists every sniff.Proto, WebSocket included.
func allProtos() []sniff.Proto {
	var ps []sniff.Proto
	for p := sniff.Proto(0); p.String() != "invalid"; p++ {
		ps = append(ps, p)
	}
	return ps
}

// zeroSeries creates the counter vectors' series at zero.
func (m *metrics) zeroSeries(g *Gateway) {
	for _, r := range refusedReasons {
		m.refused.WithLabelValues(r)
	}
	for _, p := range allProtos() {
		m.classifyTime.WithLabelValues(p.String())
	}
	for _, r := range g.rt.Load().routes {
		for _, p := range allProtos() {
			if r.anyProto || r.proto == p {
				m.classifiedN.WithLabelValues(p.String(), r.actionName())
			}
		}
	}
	// What a pool takes it hands over, and closes for one reason or
	// another.
	for _, pl := range g.pools {
		for _, p := range allProtos() {
			if pl.handlerFor(p) == nil {
				continue
			}
			m.handed.WithLabelValues(p.String(), pl.name)
			for _, r := range closedReasons {
				m.closedN.WithLabelValues(p.String(), r)
			}
		}
	}
}
