package main

// The report: one table per run condition (placement, loop mode), a row
// per load (connections/active, request size), every server's figures and
// edgemux's ratio to the best peer of the same run: for requests/s higher
// is better (ratio >= 1 meets the goal), for CPU, p99 and idle bytes lower
// is better (ratio <= 1 meets it). The user-space part of the CPU, system
// calls and context switches per request are no goal of their own; they
// say where the CPU goes.
//
// A server run several times on one row (run.sh REPEAT) is reported by
// the median of each figure, and its CPU cell shows the range of the
// runs: in a closed loop one binary lands in a batching mode (well under
// one epoll wait per request) or in one that goes idle between requests
// (one or more), gnet as well as edgemux, and the machine (a VM on a
// shared host) has phases a third slower; either moves CPU per request
// by about a third. A median over runs alternated with the peers' says
// more than any single run, and the paired section (paired.go) more than
// the medians: the ratio of runs of one round, with an interval.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

func reportMain(args []string) error {
	if len(args) != 1 {
		return errors.New("report FILE")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	var rows []result
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		rows = append(rows, r)
	}
	fmt.Print(renderReport(rows))
	return sc.Err()
}

type rowKey struct {
	pin, mode           string
	conns, active, size int
}

func renderReport(rows []result) string {
	groups := map[rowKey][]result{}
	var keys []rowKey
	for _, r := range rows {
		k := rowKey{r.Pin, r.Mode, r.Conns, r.Active, r.Size}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	var b strings.Builder
	last := ""
	for _, k := range keys {
		if head := k.pin + ", " + k.mode + " loop"; head != last {
			fmt.Fprintf(&b, "\n### server %s\n\n", head)
			fmt.Fprintln(&b, "| conns/active | size | server | req/s | CPU us/req | user us/req | syscalls/req | epoll waits/req | switches/req | p99 us | idle B/conn | errors |")
			fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|")
			last = head
		}
		g, spread := medians(groups[k])
		best := bestPeer(g)
		for _, r := range g {
			fmt.Fprintf(&b, "| %d/%d | %d | %s | %.0f | %.1f%s | %s | %s | %s | %s | %.0f | %s | %d |\n",
				r.Conns, r.Active, r.Size, r.Server, r.RPS, r.CPUus, spread[r.Server], usPerReq(r.UserUs), perReq(r.Syscalls), perReq(r.EpollWaits), perReq(r.Switches),
				r.P99us, idleCell(r), r.Errors+r.DialFailed)
		}
		for _, r := range g {
			if r.Server != "edgemux" || best.Server == "" {
				continue
			}
			fmt.Fprintf(&b, "| %d/%d | %d | edgemux / best peer | %s | %s | %s | %s | %s | %s | %s | %s | |\n",
				r.Conns, r.Active, r.Size, ratio(r.RPS, best.RPS), ratio(r.CPUus, best.CPUus), ratio(r.UserUs, best.UserUs),
				ratio(r.Syscalls, best.Syscalls), ratio(r.EpollWaits, best.EpollWaits), ratio(r.Switches, best.Switches),
				ratio(r.P99us, best.P99us), ratio(r.IdleBytes, best.IdleBytes))
		}
	}
	b.WriteString(renderPaired(keys, groups))
	return b.String()
}

// idleCell is the idle bytes per connection and, when read and not
// nothing, the file-backed part of them: "426 (file 118)". (A server's
// RssFile may also shrink a little, the kernel reclaiming a page.)
func idleCell(r result) string {
	if math.Round(r.IdleFile) == 0 {
		return fmt.Sprintf("%.0f", r.IdleBytes)
	}
	return fmt.Sprintf("%.0f (file %.0f)", r.IdleBytes, r.IdleFile)
}

// medians collapses the runs of each server in one group into one result,
// figure by figure the median (for an even count the upper one), in the
// order the servers first ran; spread is, per server run more than once,
// " (min-max, n runs)" of its CPU per request.
func medians(g []result) ([]result, map[string]string) {
	runs, order := byServer(g)
	out := make([]result, 0, len(order))
	spread := map[string]string{}
	for _, name := range order {
		rs := runs[name]
		m := rs[0]
		if len(rs) > 1 {
			median := func(f func(result) float64) float64 {
				v := make([]float64, len(rs))
				for i, r := range rs {
					v[i] = f(r)
				}
				slices.Sort(v)
				return v[len(v)/2]
			}
			m.RPS = median(func(r result) float64 { return r.RPS })
			m.CPUus = median(func(r result) float64 { return r.CPUus })
			m.UserUs = median(func(r result) float64 { return r.UserUs })
			m.Syscalls = median(func(r result) float64 { return r.Syscalls })
			m.EpollWaits = median(func(r result) float64 { return r.EpollWaits })
			m.Switches = median(func(r result) float64 { return r.Switches })
			m.P99us = median(func(r result) float64 { return r.P99us })
			m.IdleBytes = median(func(r result) float64 { return r.IdleBytes })
			m.IdleFile = median(func(r result) float64 { return r.IdleFile })
			lo, hi := rs[0].CPUus, rs[0].CPUus
			m.Requests, m.Errors, m.DialFailed = 0, 0, 0
			for _, r := range rs {
				lo, hi = min(lo, r.CPUus), max(hi, r.CPUus)
				m.Requests += r.Requests
				m.Errors += r.Errors
				m.DialFailed += r.DialFailed
			}
			spread[name] = fmt.Sprintf(" (%.1f-%.1f, %d runs)", lo, hi, len(rs))
		}
		out = append(out, m)
	}
	return out, spread
}

// bestPeer is, figure by figure, the best of the peers (every server but
// edgemux) in one group: highest req/s, lowest CPU, p99 and idle bytes.
func bestPeer(g []result) result {
	var best result
	for _, r := range g {
		if r.Server == "edgemux" || r.Requests == 0 {
			continue
		}
		if best.Server == "" {
			best = r
			best.Server = "best"
			continue
		}
		best.RPS = max(best.RPS, r.RPS)
		best.CPUus = minPos(best.CPUus, r.CPUus)
		best.UserUs = minPos(best.UserUs, r.UserUs)
		best.Syscalls = minPos(best.Syscalls, r.Syscalls)
		best.EpollWaits = minPos(best.EpollWaits, r.EpollWaits)
		best.Switches = minPos(best.Switches, r.Switches)
		best.P99us = minPos(best.P99us, r.P99us)
		best.IdleBytes = minPos(best.IdleBytes, r.IdleBytes)
	}
	return best
}

func minPos(a, b float64) float64 {
	if a <= 0 {
		return b
	}
	if b <= 0 {
		return a
	}
	return min(a, b)
}

// usPerReq prints microseconds per request, "n/a" when not read.
func usPerReq(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", v)
}

// perReq prints a per-request count, "n/a" when it was not counted.
func perReq(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}
