package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgemux/edgemux/protocols/modbus/upstream"
)

// ModbusDevice is one upstream Modbus device's health in /api/stats.
type ModbusDevice struct {
	Name       string            `json:"name"`
	Line       string            `json:"line"`
	Unit       int               `json:"unit_id"`
	State      string            `json:"state"` // deviceState
	Demoted    bool              `json:"demoted"`
	RTTms      float64           `json:"last_rtt_ms"`              // of the last answer; meaningless before the first (last_answer_ms absent)
	LastAnswer int64             `json:"last_answer_ms,omitempty"` // unix ms; absent: never answered
	Error      string            `json:"last_error,omitempty"`
	Counts     map[string]uint64 `json:"counts"` // deviceEvents
}

// deviceState names a device's state for people: "demoted" (failed
// repeatedly, asked only once per probe_every), "disconnected" (its last
// request got no answer: no connection, a timeout), "ok" (its last request
// was answered), "unknown" (nothing asked yet).
func deviceState(h upstream.Health) string {
	switch {
	case h.Demoted:
		return "demoted"
	case h.Failing:
		return "disconnected"
	case !h.LastAnswer.IsZero():
		return "ok"
	}
	return "unknown"
}

var (
	descMbDevice  = prometheus.NewDesc("edgemux_modbus_device_total", "Upstream Modbus device requests and errors, by kind.", []string{"device", "line", "event"}, nil)
	descMbRTT     = prometheus.NewDesc("edgemux_modbus_device_rtt_seconds", "Upstream Modbus device: round-trip time of the last answer.", []string{"device", "line"}, nil)
	descMbDemoted = prometheus.NewDesc("edgemux_modbus_device_demoted", "Upstream Modbus device demoted (1) after repeated failures: asked only once per probe_every.", []string{"device", "line"}, nil)
)

// deviceEvents names a device's counters, in a fixed order.
func deviceEvents(h upstream.Health) []struct {
	name string
	n    uint64
} {
	return []struct {
		name string
		n    uint64
	}{
		{"requests", h.Requests}, {"ok", h.OK}, {"exceptions", h.Exceptions}, {"timeouts", h.Timeouts},
		{"crc_errors", h.CRCErrors}, {"stale", h.Stale}, {"failed", h.Failed}, {"refused", h.Refused}, {"retries", h.Retries},
	}
}

// modbusDevices is the devices' health for /api/stats.
func (g *Gateway) modbusDevices() []ModbusDevice {
	var out []ModbusDevice
	for _, h := range g.up.Health() {
		d := ModbusDevice{Name: h.Name, Line: h.Line, Unit: int(h.Unit), State: deviceState(h), Demoted: h.Demoted,
			RTTms: float64(h.LastRTT.Microseconds()) / 1000, Error: h.LastError, Counts: map[string]uint64{}}
		if !h.LastAnswer.IsZero() {
			d.LastAnswer = h.LastAnswer.UnixMilli()
		}
		for _, e := range deviceEvents(h) {
			d.Counts[e.name] = e.n
		}
		out = append(out, d)
	}
	return out
}

// collectModbusDevices reports the devices' health in /metrics.
func collectModbusDevices(ch chan<- prometheus.Metric, g *Gateway) {
	for _, h := range g.up.Health() {
		for _, e := range deviceEvents(h) {
			ch <- prometheus.MustNewConstMetric(descMbDevice, prometheus.CounterValue, float64(e.n), h.Name, h.Line, e.name)
		}
		ch <- prometheus.MustNewConstMetric(descMbRTT, prometheus.GaugeValue, h.LastRTT.Seconds(), h.Name, h.Line)
		demoted := 0.0
		if h.Demoted {
			demoted = 1
		}
		ch <- prometheus.MustNewConstMetric(descMbDemoted, prometheus.GaugeValue, demoted, h.Name, h.Line)
	}
}
