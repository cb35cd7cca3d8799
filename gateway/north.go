package gateway

import (
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgemux/edgemux/route/north"
)

// The northbound sinks (route/north): built by New (their stores opened,
// so a second gateway on the same data_dir fails at once), started by
// Run, closed by stop. With no north.sinks configured the set is empty
// and nothing runs.

// buildNorth makes the sinks; {gateway} in their templates is the host
// name.
func (g *Gateway) buildNorth() error {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "edgemux"
	}
	g.north, err = north.Build(g.cfg.North, host, g.bus, nil, g.log.With("component", "north"))
	return err
}

var (
	descNorthEvents = map[string]*prometheus.Desc{}
	northEvents     = []struct{ name, help string }{
		{"published", "Messages a north sink's broker took (QoS 1: acknowledged)."},
		{"failed", "Publishes of a north sink that failed (link down, no acknowledgement in time); with a store they are sent again."},
		{"spooled", "Messages a north sink appended to its store on disk."},
		{"drained", "Messages a north sink published from the backlog its store kept through an outage."},
		{"dropped", "Messages a north sink lost: its store's cap (policy oldest), no store and the link down, its bus queue overflowing."},
		{"refused", "Messages a north sink's store refused at its cap (policy refuse)."},
	}
	descNorthCommands = prometheus.NewDesc("edgemux_north_commands_total", "Commands from a north sink's broker into the bus, by result: written (the bus or the device took it), refused (bus topic not allowed), failed.", []string{"sink", "result"}, nil)
	descNorthDepth    = prometheus.NewDesc("edgemux_north_queue_records", "Messages in a north sink's store.", []string{"sink"}, nil)
	descNorthBytes    = prometheus.NewDesc("edgemux_north_queue_bytes", "Bytes of a north sink's store on disk (what its max_bytes caps).", []string{"sink"}, nil)
	descNorthOldest   = prometheus.NewDesc("edgemux_north_queue_oldest_age_seconds", "Age of the oldest message in a north sink's store; 0 when empty.", []string{"sink"}, nil)
	descNorthLinkUp   = prometheus.NewDesc("edgemux_north_link_up", "1 while a north sink is connected to its broker.", []string{"sink"}, nil)
	descNorthCmdsUp   = prometheus.NewDesc("edgemux_north_commands_up", "1 while a north sink's commands are subscribed at its broker (0 for a sink without commands).", []string{"sink"}, nil)
	descNorthSuppr    = prometheus.NewDesc("edgemux_north_suppressed_total", "Messages a north sink's on: change maps did not send (unchanged payload).", []string{"sink"}, nil)
	descNorthEvicted  = prometheus.NewDesc("edgemux_north_change_evictions_total", "Topics evicted from a north sink's on: change table (change_table bounds it).", []string{"sink"}, nil)
)

func init() {
	for _, e := range northEvents {
		descNorthEvents[e.name] = prometheus.NewDesc("edgemux_north_"+e.name+"_total", e.help, []string{"sink"}, nil)
	}
}

// northCollector reports every sink's counters at scrape time, so each
// series is there at zero from start-up.
type northCollector struct{ g *Gateway }

func (c northCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descNorthEvents {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{descNorthCommands, descNorthDepth, descNorthBytes, descNorthOldest, descNorthLinkUp, descNorthCmdsUp, descNorthSuppr, descNorthEvicted} {
		ch <- d
	}
}

func (c northCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, sink string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, sink)
	}
	for _, s := range c.g.north.Stats() {
		for name, v := range map[string]uint64{"published": s.Published, "failed": s.Failed, "spooled": s.Spooled,
			"drained": s.Drained, "dropped": s.Dropped, "refused": s.Refused} {
			counter(descNorthEvents[name], v, s.Name)
		}
		counter(descNorthCommands, s.CommandsWritten, s.Name, "written")
		counter(descNorthCommands, s.CommandsRefused, s.Name, "refused")
		counter(descNorthCommands, s.CommandsFailed, s.Name, "failed")
		counter(descNorthSuppr, s.Suppressed, s.Name)
		counter(descNorthEvicted, s.Evicted, s.Name)
		gauge(descNorthDepth, float64(s.QueueRecords), s.Name)
		gauge(descNorthBytes, float64(s.QueueBytes), s.Name)
		gauge(descNorthOldest, s.OldestAge, s.Name)
		gauge(descNorthLinkUp, oneIf(s.LinkUp), s.Name)
		gauge(descNorthCmdsUp, oneIf(s.CommandsUp), s.Name)
	}
}

// oneIf is a boolean as a gauge's value.
func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
