package main

// The tables: one per row type, the stacks side by side, rudp's ratio to
// each peer, and which stack wins each line.

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// line is one table line: a value per stack (NaN: not measured).
type line struct {
	what   string
	values []float64
	format string // for the values
	lower  bool   // lower is better
	judge  bool   // name a winner
}

// table prints lines for the stacks named.
func table(w io.Writer, names []string, lines []line) {
	fmt.Fprintf(w, "%-32s", "")
	for _, n := range names {
		fmt.Fprintf(w, " %12s", n)
	}
	for _, n := range names[1:] {
		fmt.Fprintf(w, " %14s", names[0]+"/"+n)
	}
	fmt.Fprintf(w, "  %s\n", "wins")
	for _, l := range lines {
		fmt.Fprintf(w, "%-32s", l.what)
		for _, v := range l.values {
			if math.IsNaN(v) {
				fmt.Fprintf(w, " %12s", "-")
			} else {
				fmt.Fprintf(w, " %12s", fmt.Sprintf(l.format, v))
			}
		}
		for _, v := range l.values[1:] {
			if r := l.values[0] / v; math.IsNaN(r) || math.IsInf(r, 0) {
				fmt.Fprintf(w, " %14s", "-")
			} else {
				fmt.Fprintf(w, " %14.2f", r)
			}
		}
		if l.judge {
			fmt.Fprintf(w, "  %s", winner(names, l.values, l.lower))
		}
		fmt.Fprintln(w)
	}
}

// winner names the best value's stack (several on a tie).
func winner(names []string, values []float64, lower bool) string {
	best := math.NaN()
	for _, v := range values {
		if !math.IsNaN(v) && (math.IsNaN(best) || (lower && v < best) || (!lower && v > best)) {
			best = v
		}
	}
	var won []string
	for i, v := range values {
		if v == best {
			won = append(won, names[i])
		}
	}
	return strings.Join(won, "+")
}

func ms(ns int64) float64 {
	if ns < 0 {
		return math.NaN()
	}
	return float64(ns) / 1e6
}

// telemetryLines are one loss level's lines.
func telemetryLines(rs []telemetryResult) []line {
	n := len(rs)
	delivered, p50, p99, p999, maxl, both, up := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, r := range rs {
		if r.sent == 0 {
			delivered[i], p50[i], p99[i], p999[i], maxl[i], both[i], up[i] = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
			continue
		}
		delivered[i] = 100 * float64(r.sum.delivered) / float64(r.sent)
		p50[i] = ms(percentile(r.sum.latencies, 50))
		p99[i] = ms(percentile(r.sum.latencies, 99))
		p999[i] = ms(percentile(r.sum.latencies, 99.9))
		maxl[i] = ms(percentile(r.sum.latencies, 100))
		both[i], up[i] = r.wireBoth(), r.wireUp()
	}
	return []line{
		{what: "delivered once, in order (%)", values: delivered, format: "%.3f", judge: true},
		{what: "latency p50 (ms)", values: p50, format: "%.1f", lower: true, judge: true},
		{what: "latency p99 (ms)", values: p99, format: "%.1f", lower: true, judge: true},
		{what: "latency p99.9 (ms)", values: p999, format: "%.1f", lower: true},
		{what: "latency max (ms)", values: maxl, format: "%.1f", lower: true},
		{what: "wire B / payload B, both ways", values: both, format: "%.2f", lower: true, judge: true},
		{what: "wire B / payload B, c->s", values: up, format: "%.2f", lower: true, judge: true},
	}
}

func idleLines(rs []idleResult) []line {
	n := len(rs)
	asked, held, setup, heap, rssv, cpu, empty, gor := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	per10k, dl, rate, rateIn, perDgram := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, r := range rs {
		if r.asked == 0 {
			asked[i], held[i], setup[i], heap[i], rssv[i], cpu[i], empty[i], gor[i] = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
			per10k[i], dl[i], rate[i], rateIn[i], perDgram[i] = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
			continue
		}
		asked[i], held[i], setup[i], dl[i] = float64(r.asked), float64(r.held), r.setupTime.Seconds(), float64(r.delivered)
		heap[i], rssv[i] = r.heapPerSession(), r.rssPerSession()
		cpu[i], empty[i] = 100*r.cpuIdle, 100*r.cpuEmpty
		per10k[i] = 100 * r.cpuIdle * 10000 / float64(max(r.held, 1))
		gor[i] = float64(r.after.Goroutines)
		rate[i], rateIn[i], perDgram[i] = math.NaN(), math.NaN(), r.nsPerDatagram()
		if r.dgramRate > 0 {
			rate[i], rateIn[i] = r.dgramRate, r.dgramIn
		}
	}
	return []line{
		{what: "sessions asked for", values: asked, format: "%.0f"},
		{what: "their messages delivered", values: dl, format: "%.0f"},
		{what: "sessions held (server's count)", values: held, format: "%.0f"},
		{what: "setup: open + 1 message each (s)", values: setup, format: "%.1f"},
		{what: "heap+stacks B / session", values: heap, format: "%.0f", lower: true, judge: true},
		{what: "RSS B / session", values: rssv, format: "%.0f", lower: true, judge: true},
		{what: "idle CPU (% of a core)", values: cpu, format: "%.2f", lower: true},
		{what: "  per 10,000 sessions held", values: per10k, format: "%.2f", lower: true, judge: true},
		{what: "  the same, no session yet", values: empty, format: "%.2f", lower: true},
		{what: "  datagrams/s in + out", values: rate, format: "%.0f"},
		{what: "    of which in (to the server)", values: rateIn, format: "%.0f"},
		{what: "  ns / datagram above no session", values: perDgram, format: "%.0f", lower: true},
		{what: "server goroutines", values: gor, format: "%.0f", lower: true},
	}
}

func echoLines(rs []echoResult) []line {
	n := len(rs)
	echoes, per, perSrv, srv, cli := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, r := range rs {
		if r.echoes == 0 {
			echoes[i], per[i], perSrv[i], srv[i], cli[i] = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
			continue
		}
		echoes[i], per[i], perSrv[i] = float64(r.echoes), r.perCPU(), r.perServerCPU()
		srv[i], cli[i] = r.serverCPU.Seconds(), r.clientCPU.Seconds()
	}
	return []line{
		{what: "echoes", values: echoes, format: "%.0f"},
		{what: "echoes / CPU-s (both ends)", values: per, format: "%.0f", judge: true},
		{what: "echoes / server CPU-s", values: perSrv, format: "%.0f", judge: true},
		{what: "server CPU (s)", values: srv, format: "%.2f", lower: true},
		{what: "client CPU (s)", values: cli, format: "%.2f", lower: true},
	}
}
