package main

// Paired ratios: edgemux against each peer, round by round. run.sh
// REPEAT=N runs every server once per round, alternated, so edgemux's run
// and a peer's run of one round on a row ran minutes apart, in the same
// phase of the machine. The machine (a VM on a shared host) drifts by a
// third over an hour, more than most of the differences the goals are
// about; the ratio of two runs of one round cancels the drift, and the
// spread of those ratios over the rounds says how sure a verdict is.
// Each cell is the geometric mean of the round ratios and, from five
// rounds on, a 95 % bootstrap interval of it (percentiles of 10,000
// resamples of the rounds, fixed seed: a report renders the same twice).
// A goal is met for certain where the interval is on its side of 1.00x
// against every peer, missed where it is on the other side against one.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

const (
	minIntervalRounds = 5
	resamples         = 10000
)

// pairedFigures are the figures a paired cell is given for: the first
// three are goals (req/s higher is better, CPU and p99 lower), user time
// says where the CPU goes.
var pairedFigures = []struct {
	name string
	get  func(result) float64
}{
	{"req/s", func(r result) float64 { return r.RPS }},
	{"CPU us/req", func(r result) float64 { return r.CPUus }},
	{"p99 us", func(r result) float64 { return r.P99us }},
	{"user us/req", func(r result) float64 { return r.UserUs }},
}

// renderPaired is the paired section of a report: a row per group and
// peer where both ran at least twice; "" when no group has one.
func renderPaired(keys []rowKey, groups map[rowKey][]result) string {
	var b strings.Builder
	for _, k := range keys {
		rounds, order := byRound(groups[k])
		for _, peer := range order {
			if peer == "edgemux" {
				continue
			}
			var pairs [][2]result
			for _, rd := range rounds {
				em, ok1 := rd["edgemux"]
				pr, ok2 := rd[peer]
				if ok1 && ok2 {
					pairs = append(pairs, [2]result{em, pr})
				}
			}
			if len(pairs) < 2 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d/%d | %d | edgemux / %s | %d |", k.pin, k.conns, k.active, k.size, peer, len(pairs))
			for _, f := range pairedFigures {
				ratios := make([]float64, 0, len(pairs))
				for _, pair := range pairs {
					a, p := f.get(pair[0]), f.get(pair[1])
					if a > 0 && p > 0 {
						ratios = append(ratios, a/p)
					}
				}
				fmt.Fprintf(&b, " %s |", pairedCell(ratios))
			}
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\n### edgemux / each peer, paired by round\n\n" +
		"Geometric mean of the ratios of runs in the same round; from " + fmt.Sprint(minIntervalRounds) +
		" rounds, its 95 % bootstrap interval.\n\n" +
		"| placement | conns/active | size | pair | rounds | " + figureNames() + " |\n" +
		strings.Repeat("|---", 5+len(pairedFigures)) + "|\n" + b.String()
}

func figureNames() string {
	names := make([]string, len(pairedFigures))
	for i, f := range pairedFigures {
		names[i] = f.name
	}
	return strings.Join(names, " | ")
}

// byServer splits a group's runs by server, in the order they ran, and
// the servers in the order they first ran.
func byServer(g []result) (map[string][]result, []string) {
	runs := map[string][]result{}
	var order []string
	for _, r := range g {
		if _, ok := runs[r.Server]; !ok {
			order = append(order, r.Server)
		}
		runs[r.Server] = append(runs[r.Server], r)
	}
	return runs, order
}

// byRound splits a group's runs (in the order they ran) into rounds, a
// run per server each, and gives the servers in the order they first
// ran. run.sh runs the servers in one order every round, so a run of a
// server that comes no later in that order than the run before it
// starts a new round. A run lost (a server that failed to start) then
// leaves a hole in its round instead of moving every later run of its
// server into the round before.
func byRound(g []result) ([]map[string]result, []string) {
	_, order := byServer(g)
	pos := make(map[string]int, len(order))
	for i, name := range order {
		pos[name] = i
	}
	var rounds []map[string]result
	last := len(order)
	for _, r := range g {
		if pos[r.Server] <= last {
			rounds = append(rounds, map[string]result{})
		}
		rounds[len(rounds)-1][r.Server] = r
		last = pos[r.Server]
	}
	return rounds, order
}

// pairedCell is "1.05x" for fewer than minIntervalRounds ratios,
// "1.05x (1.00-1.10)" from there, "n/a" for none.
func pairedCell(ratios []float64) string {
	if len(ratios) == 0 {
		return "n/a"
	}
	gm := geoMean(ratios)
	if len(ratios) < minIntervalRounds {
		return fmt.Sprintf("%.2fx", gm)
	}
	lo, hi := bootstrapInterval(ratios)
	return fmt.Sprintf("%.2fx (%.2f-%.2f)", gm, lo, hi)
}

func geoMean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += math.Log(x)
	}
	return math.Exp(s / float64(len(v)))
}

// bootstrapInterval is the 2.5th and 97.5th percentile of the geometric
// mean of resamples (with replacement) of ratios.
func bootstrapInterval(ratios []float64) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	means := make([]float64, resamples)
	sample := make([]float64, len(ratios))
	for i := range means {
		for j := range sample {
			sample[j] = ratios[rng.IntN(len(ratios))]
		}
		means[i] = geoMean(sample)
	}
	slices.Sort(means)
	return means[resamples*25/1000], means[resamples*975/1000-1]
}
