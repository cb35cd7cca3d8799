package gateway

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/route/north"
	"github.com/edgemux/edgemux/sniff"
)

// StatsTopic is where the gateway publishes its own state on the bus, once
// per second while anyone subscribes, for dashboards and any subscriber on
// any protocol. "$" topics are not matched by a bare "#" (MQTT's rule), so
// they must be asked for.
const StatsTopic = "$SYS/edgemux/stats"

// Stats is the gateway's state at one moment, as JSON.
type Stats struct {
	Time          int64                     `json:"ts"` // unix ms
	Uptime        int64                     `json:"uptime_s"`
	Open          int                       `json:"open"`
	Sniffing      int                       `json:"sniffing"`
	Connections   map[string]map[string]int `json:"connections"` // protocol -> state -> count
	Classified    map[string]uint64         `json:"classified"`  // "protocol action" -> count
	Quarantine    QuarantineStats           `json:"quarantine"`
	Workers       []WorkerStats             `json:"workers"`
	Bus           map[string]uint64         `json:"bus"`
	WebSocket     map[string]uint64         `json:"websocket"`      // protocols/websocket counters
	Modbus        map[string]uint64         `json:"modbus"`         // protocols/modbus counters
	ModbusDevices []ModbusDevice            `json:"modbus_devices"` // upstream devices' health (mbdevices.go)
	Private       map[string]uint64         `json:"private"`        // protocols/private counters
	RUDP          map[string]uint64         `json:"rudp"`           // the reliable UDP core's sessions (edgemux_rudp_* in /metrics)
	CoAP          map[string]uint64         `json:"coap"`           // protocols/coap counters
	Stages        map[string]StageStats     `json:"stages"`         // sampled stage times (edgemux_stage_seconds)
	StageSample   int                       `json:"stage_sample"`   // one event in this many is sampled; 0 = off
	Stale         uint64                    `json:"stale_events"`
	Forwarding    int64                     `json:"forwarding"`
	North         []north.Stats             `json:"north"`   // northbound sinks, in configuration order (edgemux_north_* in /metrics)
	Cluster       ClusterStats              `json:"cluster"` // the bus across gateways (cluster.go)
}

// QuarantineStats summarises the quarantine book.
type QuarantineStats struct {
	Reasons    map[string]uint64 `json:"reasons"`
	BansActive int               `json:"bans_active"`
	Refused    uint64            `json:"refused"`
	Samples    []SampleView      `json:"samples"` // newest first
}

// SampleView is one quarantined connection's sample.
type SampleView struct {
	Peer   string `json:"peer"`
	Reason string `json:"reason"`
	Hex    string `json:"hex"`
	At     int64  `json:"at"` // unix ms
	Bytes  int    `json:"bytes"`
}

// WorkerStats is one worker's ring depth and work done.
type WorkerStats struct {
	Pool   string `json:"pool"`
	Index  int    `json:"index"`
	Depth  int    `json:"ring_depth"`
	Events uint64 `json:"events"`
	Lent   uint64 `json:"lent_turns"` // turns a loop ran for the worker (dispatch.lend_below)
}

// connCounts are the open connections by protocol and state: [sniff.Proto]
// [registry.State], both of which have fewer than 8 values.
type connCounts [8][8]int

// countConns scans the registry up to its high-water fd; the stats
// snapshot and the connections gauge both count from it.
func (g *Gateway) countConns() (n connCounts) {
	for fd := range g.reg.Used() {
		s := g.reg.Slot(fd)
		st, p := s.State(), s.Proto()
		if st != registry.Free && int(st) < len(n[0]) && int(p) < len(n) {
			n[p][st]++
		}
	}
	return n
}

// Snapshot reads the gateway's state. It scans the registry, so it is for
// once-a-second callers, not hot paths.
func (g *Gateway) Snapshot() Stats {
	now := time.Now()
	st := Stats{
		Time:        now.UnixMilli(),
		Uptime:      int64(now.Sub(g.start) / time.Second),
		Open:        g.reg.Len(),
		Sniffing:    g.limits.stillSniffing(),
		Connections: map[string]map[string]int{},
		Classified:  g.metrics.classifications(),
		Stale:       g.reg.Stale(),
		Stages:      g.stages.snapshot(),
		StageSample: g.cfg.Admin.StageSample,
		Forwarding:  g.fwd.active.Load(),
	}
	for p, row := range g.countConns() {
		for state, n := range row {
			if n == 0 {
				continue
			}
			name := sniff.Proto(p).String()
			if st.Connections[name] == nil {
				st.Connections[name] = map[string]int{}
			}
			st.Connections[name][registry.State(state).String()] = n
		}
	}
	book := g.book.Stats()
	st.Quarantine = QuarantineStats{Reasons: map[string]uint64{}, BansActive: book.BansActive, Refused: book.Refused}
	for r, n := range book.Reasons {
		st.Quarantine.Reasons[string(r)] = n
	}
	for _, smp := range g.book.Samples(nil) {
		st.Quarantine.Samples = append(st.Quarantine.Samples, SampleView{
			Peer: smp.Peer, Reason: string(smp.Reason), Hex: smp.Hex, At: smp.At.UnixMilli(), Bytes: smp.Bytes,
		})
	}
	for _, p := range g.pools {
		for i, w := range p.workers {
			st.Workers = append(st.Workers, WorkerStats{Pool: p.name, Index: i, Depth: w.depth(), Events: w.served.Load(), Lent: w.park.Stats().Lends})
		}
	}
	b := g.bus.Stats()
	st.Bus = map[string]uint64{
		"published": b.Published, "delivered": b.Delivered, "dropped": b.Dropped,
		"cache_full": b.CacheFull, "over_quota": b.OverQuota,
		"topics": uint64(b.Topics), "reserved": uint64(b.Reserved), "subscribers": uint64(b.Subscribers),
	}
	st.WebSocket = counterMap(g.ws.Stats().Counters())
	st.Modbus = counterMap(g.mb.Stats().Counters())
	st.ModbusDevices = g.modbusDevices()
	st.Private = counterMap(g.priv.Stats().Counters())
	// Sessions over the reliable UDP core have no registry slot: they
	// show as their own protocol, all active.
	ss, hs := g.streams.Stats(), g.rudp.Stats()
	if ss.Open > 0 {
		st.Connections["private/udp"] = map[string]int{"active": int(ss.Open)}
	}
	st.RUDP = map[string]uint64{
		"sessions": uint64(max(ss.Open, 0)), "opened": ss.Opened, "retries": hs.Endpoints.Retries,
		"bad_cookies": hs.Endpoints.BadCookies, "refused": hs.Endpoints.Refused, "malformed": hs.Endpoints.Malformed,
	}
	st.CoAP = counterMap(g.coap.Stats().Counters())
	st.North = g.north.Stats()
	st.Cluster = g.clusterStats()
	return st
}

// counterMap is a handler's counters by name, for the snapshot.
func counterMap(cs []protocols.Counter) map[string]uint64 {
	m := make(map[string]uint64, len(cs))
	for _, c := range cs {
		m[c.Name] = c.N
	}
	return m
}

// publishStats runs statsTick every interval until the gateway stops.
func (g *Gateway) publishStats(interval time.Duration) {
	defer g.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-g.stopped:
			return
		case <-t.C:
			g.statsTick()
		}
	}
}

// statsTick puts a snapshot on the bus if anyone subscribes to StatsTopic
// (a dashboard, a north sink or a cluster mirror of "$SYS/..."), and
// otherwise removes the last one from the cache.
//
// Why only for a subscriber: a snapshot reads every handler's counters
// and encodes them by reflection, which maps back about 1.2 MiB of the
// executable's pages each second (its code and type data; they were
// unmapped once the gateway listened, see cmd/edgemux): on a box nobody
// watches, that is most of its RSS beyond what its connections use
// (docs/BENCHMARKS.md, "The stats snapshot"). Why forget the last one: a
// snapshot nobody refreshes would later be replayed as current to a new
// subscriber; it gets a fresh one within an interval instead, and
// GET /api/stats answers at any time.
func (g *Gateway) statsTick() {
	if !g.bus.Subscribed(StatsTopic) {
		g.bus.Forget(StatsTopic)
		return
	}
	if b, err := json.Marshal(g.Snapshot()); err == nil {
		g.bus.Publish(StatsTopic, b, "edgemux")
	}
}

func (a *admin) stats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(a.g.Snapshot())
}
