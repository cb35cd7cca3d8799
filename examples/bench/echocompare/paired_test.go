package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestPairedByRound: the paired section pairs edgemux's run of each
// round with each peer's run of that round, not the medians: a machine
// that slows down round by round moves both runs of a round alike, and
// the ratio stays. An interval is given from five rounds, none before.
func TestPairedByRound(t *testing.T) {
	run := func(server string, cpu, rps float64) result {
		return result{Server: server, Pin: "pinned", Mode: "closed", Conns: 10, Active: 10, Size: 64,
			Requests: 100, RPS: rps, CPUus: cpu, UserUs: cpu / 5, P99us: cpu * 100}
	}
	var g []result
	// Five rounds; each slower than the one before. edgemux is 1.10x
	// nbio's CPU in every round, and its req/s is 1/1.10 of nbio's; gnet
	// swings round by round around edgemux.
	gnetCPU := []float64{0.9, 1.2, 0.95, 1.15, 1.0}
	for i, drift := range []float64{1, 1.1, 1.2, 1.3, 1.4} {
		em := 10 * drift
		g = append(g, run("edgemux", em, 1e6/em), run("nbio", em/1.1, 1.1e6/em), run("gnet", em*gnetCPU[i], 1e6/(em*gnetCPU[i])))
	}
	report := renderReport(g)
	if !strings.Contains(report, "| pinned | 10/10 | 64 | edgemux / nbio | 5 | 0.91x (0.91-0.91) | 1.10x (1.10-1.10) | 1.10x (1.10-1.10) | 1.10x (1.10-1.10) |") {
		t.Errorf("the nbio row is not 1.10x in every round with a closed interval:\n%s", report)
	}
	// gnet's ratios: 1/0.9, 1/1.2, ... around 1.0; the interval must
	// hold the mean and be open on both sides.
	line := ""
	for l := range strings.Lines(report) {
		if strings.Contains(l, "edgemux / gnet |") {
			line = l
		}
	}
	cells := strings.Split(line, "|")
	if len(cells) < 8 {
		t.Fatalf("no gnet row:\n%s", report)
	}
	cpu := strings.TrimSpace(cells[7])
	var gm, lo, hi float64
	if _, err := fmt.Sscanf(cpu, "%fx (%f-%f)", &gm, &lo, &hi); err != nil {
		t.Fatalf("gnet CPU cell %q: %v", cpu, err)
	}
	if !(lo < gm && gm < hi) || lo > 1 || hi < 1 {
		t.Errorf("gnet CPU cell %q: want an interval around the mean that holds 1.00", cpu)
	}

	// Two rounds: the mean, no interval.
	report = renderReport(g[:6])
	if !strings.Contains(report, "| edgemux / nbio | 2 | 0.91x | 1.10x | 1.10x | 1.10x |") {
		t.Errorf("two rounds: want the mean alone:\n%s", report)
	}
	// One round: no paired section.
	if report := renderReport(g[:3]); strings.Contains(report, "paired by round") {
		t.Errorf("one round has a paired section:\n%s", report)
	}
}

// TestPairedWithALostRun: a server that failed to start in one round
// leaves that round out of its pairs; its later runs stay paired with
// edgemux's runs of their own rounds (the machine slows down a lot from
// round to round here, so a pair across rounds would show).
func TestPairedWithALostRun(t *testing.T) {
	run := func(server string, cpu float64) result {
		return result{Server: server, Pin: "default", Mode: "closed", Conns: 10, Active: 10, Size: 64,
			Requests: 100, RPS: 1e6 / cpu, CPUus: cpu, UserUs: cpu / 5, P99us: cpu * 100}
	}
	var g []result
	for round, drift := range []float64{1, 2, 3, 4, 5, 6} {
		em := 10 * drift
		g = append(g, run("edgemux", em))
		if round != 1 {
			g = append(g, run("gnet", em/1.2))
		}
		g = append(g, run("nbio", em/1.1))
	}
	report := renderReport(g)
	for _, want := range []string{
		"| edgemux / gnet | 5 | 0.83x (0.83-0.83) | 1.20x (1.20-1.20) |",
		"| edgemux / nbio | 6 | 0.91x (0.91-0.91) | 1.10x (1.10-1.10) |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
