package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgemux/edgemux/route/cluster"
)

// The bus across gateways (route/cluster): with cluster.mode nats, Run
// joins the cluster before it reports ready (the other gateways' last
// values are then in the cache), and stop leaves it. With mode none
// nothing here runs; the metrics are there, at zero, either way.

// startCluster joins the cluster when the configuration asks for it.
func (g *Gateway) startCluster() error {
	c := g.cfg.Cluster
	if c.Mode != "nats" {
		return nil
	}
	link, err := cluster.Start(g.bus, cluster.Options{
		URLs: c.URLs, GatewayID: c.GatewayID, Topics: c.Topics,
		Bucket: c.KVBucket, Prefix: c.SubjectPrefix, Memory: c.Storage == "memory", Replicas: c.Replicas,
		CAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile,
		CredsFile: c.CredsFile, User: c.User, PasswordFile: c.PasswordFile,
		MaxPayload: c.Limits.MaxPayload, MaxPending: c.Limits.MaxPending, MaxLoad: c.Limits.MaxLoad,
		Claims: g.poller.Topics(),
		Logger: g.log.With("component", "cluster"),
	})
	if err != nil {
		return err
	}
	g.cluster.Store(link)
	st := link.Stats()
	g.log.Info("joined the cluster", "gateway_id", st.GatewayID, "loaded", st.Loaded, "not_loaded", st.NotLoaded)
	return nil
}

// stopCluster leaves the cluster, if joined.
func (g *Gateway) stopCluster() {
	if l := g.cluster.Load(); l != nil {
		l.Close()
	}
}

// ClusterStats is the cluster link's state for /api/stats and the
// dashboard; Mode "none" when no cluster is configured.
type ClusterStats struct {
	Mode string `json:"mode"`
	cluster.Stats
}

func (g *Gateway) clusterStats() ClusterStats {
	cs := ClusterStats{Mode: g.cfg.Cluster.Mode}
	if l := g.cluster.Load(); l != nil {
		cs.Stats = l.Stats()
	}
	return cs
}

var (
	descClusterSent = prometheus.NewDesc("edgemux_cluster_sent_total", "Local messages published to the cluster (re-sends included).", nil, nil)
	descClusterRecv = prometheus.NewDesc("edgemux_cluster_received_total", "Messages from other gateways published into the local bus.", nil, nil)
	descClusterDrop = prometheus.NewDesc("edgemux_cluster_dropped_total",
		"Cluster messages lost: mirror queue drops, too long, failed publishes, slow-consumer drops, refused by the local bus.", nil, nil)
	descClusterLoop   = prometheus.NewDesc("edgemux_cluster_loop_rejected_total", "Messages that came back with this gateway's own id (another gateway uses it).", nil, nil)
	descClusterUnsent = prometheus.NewDesc("edgemux_cluster_unsent_total", "Local messages not mirrored while the link was down (their topics' last values are re-sent).", nil, nil)
	descClusterResent = prometheus.NewDesc("edgemux_cluster_resent_total", "Last values re-sent after the link came back.", nil, nil)
	descClusterBad    = prometheus.NewDesc("edgemux_cluster_invalid_total", "Messages from NATS without an origin, with a bad subject, or on a topic this gateway polls.", nil, nil)
	descClusterUp     = prometheus.NewDesc("edgemux_cluster_link_up", "1 while the NATS link is up; 0 when down or no cluster is configured.", nil, nil)
	descClusterRecon  = prometheus.NewDesc("edgemux_cluster_reconnects_total", "Times the NATS link came back.", nil, nil)
	descClusterFwd    = prometheus.NewDesc("edgemux_cluster_writes_forwarded_total", "Writes to topics another gateway polls, sent to that gateway.", nil, nil)
	descClusterFwdBad = prometheus.NewDesc("edgemux_cluster_writes_forward_failed_total", "Forwarded writes refused there, not taken by the device, or unanswered.", nil, nil)
	descClusterServed = prometheus.NewDesc("edgemux_cluster_writes_served_total", "Writes other gateways sent to this gateway's polled devices.", nil, nil)
	descClusterLoaded = prometheus.NewDesc("edgemux_cluster_kv_loaded", "Last values loaded from the KV bucket at start.", nil, nil)
	descClusterNotLd  = prometheus.NewDesc("edgemux_cluster_kv_not_loaded", "Last values in the KV bucket past cluster.limits.max_load at start, not loaded.", nil, nil)
)

// clusterCollector reports the cluster link's counters, at zero before
// (or without) a link.
type clusterCollector struct{ g *Gateway }

func (c clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClusterSent, descClusterRecv, descClusterDrop, descClusterLoop,
		descClusterUnsent, descClusterResent, descClusterBad, descClusterUp, descClusterRecon,
		descClusterLoaded, descClusterNotLd, descClusterFwd, descClusterFwdBad, descClusterServed} {
		ch <- d
	}
}

func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.g.clusterStats()
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter(descClusterSent, s.Sent)
	counter(descClusterRecv, s.Received)
	counter(descClusterDrop, s.Dropped)
	counter(descClusterLoop, s.LoopRejected)
	counter(descClusterUnsent, s.Unsent)
	counter(descClusterResent, s.Resent)
	counter(descClusterBad, s.Invalid)
	counter(descClusterRecon, s.Reconnects)
	counter(descClusterFwd, s.Forwarded)
	counter(descClusterFwdBad, s.ForwardFail)
	counter(descClusterServed, s.Served)
	ch <- prometheus.MustNewConstMetric(descClusterUp, prometheus.GaugeValue, oneIf(s.LinkUp))
	gauge(descClusterLoaded, s.Loaded)
	gauge(descClusterNotLd, s.NotLoaded)
}
