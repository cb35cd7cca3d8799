package main

// The report: one table per run condition (placement, loop mode), a row
// per load (connections/active, request size), every server's figures and
// edgemux's ratio to the best peer of the same run: for requests/s higher
// is better (ratio >= 1 meets the goal), for CPU, p99 and idle bytes lower
// is better (ratio <= 1 meets it). The user-space part of the CPU, system
// calls and context switches per request are no goal of their own; they
// say where the CPU goes.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
		g := groups[k]
		best := bestPeer(g)
		for _, r := range g {
			fmt.Fprintf(&b, "| %d/%d | %d | %s | %.0f | %.1f | %s | %s | %s | %s | %.0f | %.0f | %d |\n",
				r.Conns, r.Active, r.Size, r.Server, r.RPS, r.CPUus, usPerReq(r.UserUs), perReq(r.Syscalls), perReq(r.EpollWaits), perReq(r.Switches),
				r.P99us, r.IdleBytes, r.Errors+r.DialFailed)
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
	return b.String()
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
