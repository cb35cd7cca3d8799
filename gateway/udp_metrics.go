package gateway

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgemux/edgemux/sniff"
)

// The datagram path's counters. Loops and workers count in a local tally
// per recvmmsg or sendmmsg batch and add it to the gateway's counters
// once, so a datagram costs no atomic operation and no Prometheus label
// lookup; a collector reads them, and the sockets' own counters, at scrape
// time.

// Why a datagram was dropped.
const (
	dropTruncated = iota // longer than udp.max_datagram (MSG_TRUNC): never parsed
	dropUnrouted         // no udp.routes entry for its class (unknown datagrams among them)
	dropQueueFull        // its worker held every one of the lane's udp.queue batches
	dropRoute            // the handler's Route panicked or named no worker of the pool
	dropSendFull         // queued by a handler, but the socket's send buffer was full
	dropSendError        // queued by a handler, but the kernel refused it (sendmmsg)
	numDrops
)

var dropNames = [numDrops]string{"truncated", "unrouted", "queue_full", "route", "send_buffer_full", "send_error"}

// udpTally is what one batch counted.
type udpTally struct {
	received [numClasses]uint64
	drops    [numDrops]uint64
	sent     uint64
}

// udpCounters are the gateway's datagram counters.
type udpCounters struct {
	received [numClasses]atomic.Uint64
	drops    [numDrops]atomic.Uint64
	sent     atomic.Uint64
}

func (u *udpCounters) add(t *udpTally) {
	for i, n := range t.received {
		if n > 0 {
			u.received[i].Add(n)
		}
	}
	for i, n := range t.drops {
		if n > 0 {
			u.drops[i].Add(n)
		}
	}
	if t.sent > 0 {
		u.sent.Add(t.sent)
	}
}

var (
	descDatagrams   = prometheus.NewDesc("edgemux_datagrams_total", "UDP datagrams received, by class (truncated ones aside).", []string{"class"}, nil)
	descDgramDrops  = prometheus.NewDesc("edgemux_datagram_drops_total", "Datagrams dropped by the gateway, by reason.", []string{"reason"}, nil)
	descDgramSent   = prometheus.NewDesc("edgemux_datagrams_sent_total", "Datagrams the handlers sent (sendmmsg).", nil, nil)
	descKernelDrops = prometheus.NewDesc("edgemux_udp_kernel_drops_total", "Datagrams the kernel dropped on a UDP socket of the shared port, mostly for a full receive buffer (SO_MEMINFO sk_drops, as in /proc/net/udp).", []string{"socket"}, nil)
	descUDPBuffer   = prometheus.NewDesc("edgemux_udp_buffer_bytes", "Socket buffer size the kernel gave a UDP socket of the shared port (getsockopt: twice what was asked, capped by net.core.rmem_max/wmem_max unless running as root).", []string{"socket", "dir"}, nil)
	descWorkerDgram = prometheus.NewDesc("edgemux_worker_datagrams_total", "Datagrams a worker handed to its handlers.", []string{"pool", "worker"}, nil)
)

// udpCollector reports the datagram path at scrape time.
type udpCollector struct{ g *Gateway }

func (c udpCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDatagrams, descDgramDrops, descDgramSent, descKernelDrops, descUDPBuffer, descWorkerDgram} {
		ch <- d
	}
}

func (c udpCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.g
	for i := range numClasses {
		ch <- prometheus.MustNewConstMetric(descDatagrams, prometheus.CounterValue,
			float64(g.udpStats.received[i].Load()), sniff.DatagramClass(i).String())
	}
	for i, name := range dropNames {
		ch <- prometheus.MustNewConstMetric(descDgramDrops, prometheus.CounterValue, float64(g.udpStats.drops[i].Load()), name)
	}
	ch <- prometheus.MustNewConstMetric(descDgramSent, prometheus.CounterValue, float64(g.udpStats.sent.Load()))
	for i, u := range g.udpSockets() {
		s := strconv.Itoa(i)
		if n, ok := u.kernelDrops(); ok {
			ch <- prometheus.MustNewConstMetric(descKernelDrops, prometheus.CounterValue, float64(n), s)
		}
		ch <- prometheus.MustNewConstMetric(descUDPBuffer, prometheus.GaugeValue, float64(u.rcvbuf), s, "receive")
		ch <- prometheus.MustNewConstMetric(descUDPBuffer, prometheus.GaugeValue, float64(u.sndbuf), s, "send")
	}
	worker := func(w *worker, index int) {
		if w.dg != nil {
			ch <- prometheus.MustNewConstMetric(descWorkerDgram, prometheus.CounterValue,
				float64(w.dg.received.Load()), w.pool.name, strconv.Itoa(index))
		}
	}
	if g.cfg.Dispatch.Policy == "inline" {
		// The loops run the workers: worker i is loop i's, as the
		// handlers' Worker(index) saw it.
		for _, l := range g.loops {
			for _, w := range l.inline {
				worker(w, l.idx)
			}
		}
		return
	}
	for _, w := range g.workers {
		worker(w, w.local)
	}
}
