package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgemux/edgemux/protocols/modbus/poll"
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
	Counts     map[string]uint64 `json:"counts"`         // deviceEvents
	Poll       *ModbusPoll       `json:"poll,omitempty"` // a polled device's polling (poll.interval set)
	// Dial-in devices only: whether their connection is attached now,
	// and from where it last came.
	Connected *bool  `json:"connected,omitempty"`
	Peer      string `json:"peer,omitempty"`
}

// ModbusPoll is a polled device's counters in /api/stats.
type ModbusPoll struct {
	Counts     map[string]uint64 `json:"counts"`       // pollEvents
	LastPollMs int64             `json:"last_poll_ms"` // Unix ms of the last finished poll; 0 before the first
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
	descMbDevice    = prometheus.NewDesc("edgemux_modbus_device_total", "Upstream Modbus device requests and errors, by kind.", []string{"device", "line", "event"}, nil)
	descMbRTT       = prometheus.NewDesc("edgemux_modbus_device_rtt_seconds", "Upstream Modbus device: round-trip time of the last answer.", []string{"device", "line"}, nil)
	descMbPoll      = prometheus.NewDesc("edgemux_modbus_poll_total", "Modbus poller: polls, reads, samples and writes of a polled device, by event.", []string{"device", "line", "event"}, nil)
	descMbPollLast  = prometheus.NewDesc("edgemux_modbus_poll_last_seconds", "Modbus poller: Unix time of the device's last finished poll (0 before the first).", []string{"device", "line"}, nil)
	descMbConnected = prometheus.NewDesc("edgemux_modbus_device_connected", "Dial-in Modbus device connected (1) to the shared port now.", []string{"device", "line"}, nil)
	descMbDemoted   = prometheus.NewDesc("edgemux_modbus_device_demoted", "Upstream Modbus device demoted (1) after repeated failures: asked only once per probe_every.", []string{"device", "line"}, nil)
)

// namedCount is one counter of a device, under its label value.
type namedCount struct {
	name string
	n    uint64
}

// deviceEvents names a device's counters, in a fixed order.
func deviceEvents(h upstream.Health) []namedCount {
	return []namedCount{
		{"requests", h.Requests}, {"ok", h.OK}, {"exceptions", h.Exceptions}, {"timeouts", h.Timeouts},
		{"crc_errors", h.CRCErrors}, {"stale", h.Stale}, {"failed", h.Failed}, {"refused", h.Refused}, {"retries", h.Retries},
		{"connects", h.Connects},
	}
}

// pollEvents names a polled device's counters, in a fixed order.
func pollEvents(s poll.Stats) []namedCount {
	return []namedCount{
		{"polls", s.Polls}, {"reads", s.Reads}, {"read_failed", s.Failed}, {"read_refused", s.Refused},
		{"published", s.Published}, {"publish_refused", s.Dropped}, {"decode_errors", s.Decode},
		{"writes", s.Writes}, {"writes_ok", s.WritesOK}, {"writes_failed", s.WritesBad},
	}
}

// pollStats is the poller's counters by device name.
func (g *Gateway) pollStats() map[string]poll.Stats {
	out := map[string]poll.Stats{}
	for _, s := range g.poller.Stats() {
		out[s.Device] = s
	}
	return out
}

// modbusDevices is the devices' health, and polling, for /api/stats.
func (g *Gateway) modbusDevices() []ModbusDevice {
	var out []ModbusDevice
	polled := g.pollStats()
	for _, h := range g.up.Health() {
		d := ModbusDevice{Name: h.Name, Line: h.Line, Unit: int(h.Unit), State: deviceState(h), Demoted: h.Demoted,
			RTTms: float64(h.LastRTT.Microseconds()) / 1000, Error: h.LastError, Counts: map[string]uint64{}}
		if !h.LastAnswer.IsZero() {
			d.LastAnswer = h.LastAnswer.UnixMilli()
		}
		for _, e := range deviceEvents(h) {
			d.Counts[e.name] = e.n
		}
		if s, ok := polled[h.Name]; ok {
			d.Poll = &ModbusPoll{Counts: map[string]uint64{}}
			for _, e := range pollEvents(s) {
				d.Poll.Counts[e.name] = e.n
			}
			if !s.LastPoll.IsZero() {
				d.Poll.LastPollMs = s.LastPoll.UnixMilli()
			}
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
	collectModbusPoll(ch, g)
}

// collectModbusPoll reports the polled devices' counters in /metrics,
// every series from start-up (at zero until something happens).
func collectModbusPoll(ch chan<- prometheus.Metric, g *Gateway) {
	lines := map[string]string{}
	for _, d := range g.up.Devices() {
		lines[d.Name()] = d.Health().Line
	}
	for _, s := range g.poller.Stats() {
		line := lines[s.Device]
		for _, e := range pollEvents(s) {
			ch <- prometheus.MustNewConstMetric(descMbPoll, prometheus.CounterValue, float64(e.n), s.Device, line, e.name)
		}
		last := 0.0
		if !s.LastPoll.IsZero() {
			last = float64(s.LastPoll.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(descMbPollLast, prometheus.GaugeValue, last, s.Device, line)
	}
}
