package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgemux/edgemux/protocols/modbus/upstream"
)

// ModbusDevice is one upstream Modbus device's health in /api/stats.
type ModbusDevice struct {
	Name    string            `json:"name"`
	Line    string            `json:"line"`
	Unit    int               `json:"unit_id"`
	Demoted bool              `json:"demoted"`
	RTTms   float64           `json:"last_rtt_ms"`
	Error   string            `json:"last_error,omitempty"`
	Counts  map[string]uint64 `json:"counts"` // deviceEvents
	// Dial-in devices only: whether their connection is attached now,
	// and from where it last came.
	Connected *bool  `json:"connected,omitempty"`
	Peer      string `json:"peer,omitempty"`
}

var (
	descMbDevice    = prometheus.NewDesc("edgemux_modbus_device_total", "Upstream Modbus device requests and errors, by kind.", []string{"device", "line", "event"}, nil)
	descMbRTT       = prometheus.NewDesc("edgemux_modbus_device_rtt_seconds", "Upstream Modbus device: round-trip time of the last answer.", []string{"device", "line"}, nil)
	descMbConnected = prometheus.NewDesc("edgemux_modbus_device_connected", "Dial-in Modbus device connected (1) to the shared port now.", []string{"device", "line"}, nil)
	descMbDemoted   = prometheus.NewDesc("edgemux_modbus_device_demoted", "Upstream Modbus device demoted (1) after repeated failures: asked only once per probe_every.", []string{"device", "line"}, nil)
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
		{"connects", h.Connects},
	}
}

// modbusDevices is the devices' health for /api/stats.
func (g *Gateway) modbusDevices() []ModbusDevice {
	var out []ModbusDevice
	for _, h := range g.up.Health() {
		d := ModbusDevice{Name: h.Name, Line: h.Line, Unit: int(h.Unit), Demoted: h.Demoted,
			RTTms: float64(h.LastRTT.Microseconds()) / 1000, Error: h.LastError, Counts: map[string]uint64{}}
		for _, e := range deviceEvents(h) {
			d.Counts[e.name] = e.n
		}
		if h.DialIn {
			d.Connected, d.Peer = &h.Connected, h.Peer
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
		if h.DialIn {
			connected := 0.0
			if h.Connected {
				connected = 1
			}
			ch <- prometheus.MustNewConstMetric(descMbConnected, prometheus.GaugeValue, connected, h.Name, h.Line)
		}
	}
}
