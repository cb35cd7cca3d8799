// Package report holds one server's benchmark result and prints the side
// by side table of several, with the ratios of edgemux to each peer.
package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/memstat"
)

// Limits with safe defaults.
const (
	maxLine    = 64 << 10 // bytes per JSON line
	maxResults = 16       // results in one table
)

// Sentinel errors.
var (
	ErrBadLine  = errors.New("report: malformed result line")
	ErrTooMany  = errors.New("report: too many results")
	ErrNoResult = errors.New("report: no results")
)

// Result is what one loadgen run measured against one server.
type Result struct {
	Server       string         `json:"server"`
	Conns        int            `json:"conns"`           // idle subscribers held
	HeapForcedGC bool           `json:"heap_forced_gc"`  // heap figures taken right after runtime.GC()
	Baseline     memstat.Sample `json:"baseline"`        // before the first connection
	Idle         memstat.Sample `json:"idle"`            // with Conns subscribed and idle
	AfterFanout  memstat.Sample `json:"after_fanout"`    // right after the fan-out (after a forced GC)
	PeakFanout   memstat.Peak   `json:"peak_fanout"`     // the most resident during the fan-out
	Publishes    int            `json:"publishes"`       // fan-out publishes sent
	Expected     int64          `json:"expected"`        // Publishes x subscribers
	Delivered    int64          `json:"delivered"`       // deliveries counted by the clients
	FanoutSecs   float64        `json:"fanout_secs"`     // first publish to last delivery
	LoadAvg      float64        `json:"load_avg"`        // 1-minute load average as the fan-out began
	ServerCPU    float64        `json:"server_cpu_secs"` // server's user+system CPU during the fan-out
	ClientCPU    float64        `json:"client_cpu_secs"` // loadgen's, the same
	Note         string         `json:"note,omitempty"`  // what went wrong, if anything
}

// RSSPerConn is the resident-set growth per idle connection, in bytes.
func (r Result) RSSPerConn() float64 { return perConn(r.Idle.RSS-r.Baseline.RSS, r.Conns) }

// HeapPerConn is the Go heap growth per idle connection, in bytes.
func (r Result) HeapPerConn() float64 {
	return perConn(r.Idle.HeapInuse-r.Baseline.HeapInuse, r.Conns)
}

// GoroutinesPerConn is the goroutine growth per idle connection.
func (r Result) GoroutinesPerConn() float64 {
	return perConn(r.Idle.Goroutines-r.Baseline.Goroutines, r.Conns)
}

// CPUPerDelivery is the server's CPU time per delivery, in microseconds:
// unlike MsgsPerSec it hardly depends on what else the machine runs.
func (r Result) CPUPerDelivery() float64 {
	if r.Delivered <= 0 {
		return 0
	}
	return r.ServerCPU * 1e6 / float64(r.Delivered)
}

// MsgsPerSec is deliveries per second during the fan-out.
func (r Result) MsgsPerSec() float64 {
	if r.FanoutSecs <= 0 {
		return 0
	}
	return float64(r.Delivered) / r.FanoutSecs
}

func perConn(delta int64, conns int) float64 {
	if conns <= 0 {
		return 0
	}
	return float64(delta) / float64(conns)
}

// Read parses one Result per non-empty line.
func Read(r io.Reader) ([]Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	var out []Result
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if len(out) == maxResults {
			return nil, fmt.Errorf("%w: more than %d", ErrTooMany, maxResults)
		}
		var res Result
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrBadLine, n, err)
		}
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadLine, err)
	}
	return out, nil
}

// row is one line of the table: a label and how to get a figure.
type row struct {
	label string
	value func(Result) float64
	unit  string // how the figure is printed: B, MiB, x, n, s, /s, %
	ratio bool   // print edgemux/peer for this row
	needs need   // the phase the figure comes from
}

// need is the phase of a run a figure needs; a run that did not get that
// far shows "-" instead of a misleading zero.
type need uint8

const (
	needStart  need = iota // the baseline sample
	needIdle               // the idle sample
	needFanout             // the fan-out
	needPeak               // the fan-out, with the server's memory sampled
)

func (r Result) reached(n need) bool {
	switch n {
	case needIdle:
		return r.Conns > 0 && r.Idle.RSS > 0
	case needFanout:
		return r.Expected > 0
	case needPeak:
		return r.Expected > 0 && r.PeakFanout.Samples > 0
	default:
		return r.Baseline.RSS > 0
	}
}

var rows = []row{
	{"RSS/conn, idle (user space)", Result.RSSPerConn, "B", true, needIdle},
	{"Go heap/conn, idle", Result.HeapPerConn, "B", true, needIdle},
	{"goroutines/conn, idle", Result.GoroutinesPerConn, "x", true, needIdle},
	{"fan-out deliveries/s", Result.MsgsPerSec, "/s", true, needFanout},
	{"server CPU/delivery", Result.CPUPerDelivery, "us", true, needFanout},
	{"RSS peak in fan-out", func(r Result) float64 { return float64(r.PeakFanout.RSS) }, "MiB", true, needPeak},
	{"  RssAnon at peak (heap)", func(r Result) float64 { return float64(r.PeakFanout.Anon) }, "MiB", true, needPeak},
	{"  RssFile at peak (binary)", func(r Result) float64 { return float64(r.PeakFanout.File) }, "MiB", true, needPeak},
	{"fan-out delivered", func(r Result) float64 { return pct(r.Delivered, r.Expected) }, "%", false, needFanout},
	{"idle conns held", func(r Result) float64 { return float64(r.Conns) }, "n", false, needStart},
	{"RSS baseline", func(r Result) float64 { return float64(r.Baseline.RSS) }, "MiB", false, needStart},
	{"  RssAnon baseline", func(r Result) float64 { return float64(r.Baseline.RSSAnon) }, "MiB", false, needStart},
	{"  RssFile baseline", func(r Result) float64 { return float64(r.Baseline.RSSFile) }, "MiB", false, needStart},
	{"RSS idle", func(r Result) float64 { return float64(r.Idle.RSS) }, "MiB", false, needIdle},
	{"RSS after fan-out + GC", func(r Result) float64 { return float64(r.AfterFanout.RSS) }, "MiB", false, needFanout},
	{"Go heap baseline", func(r Result) float64 { return float64(r.Baseline.HeapInuse) }, "MiB", false, needStart},
	{"Go heap idle", func(r Result) float64 { return float64(r.Idle.HeapInuse) }, "MiB", false, needIdle},
	{"goroutines baseline", func(r Result) float64 { return float64(r.Baseline.Goroutines) }, "n", false, needStart},
	{"goroutines idle", func(r Result) float64 { return float64(r.Idle.Goroutines) }, "n", false, needIdle},
	{"fan-out seconds", func(r Result) float64 { return r.FanoutSecs }, "s", false, needFanout},
	{"server CPU in fan-out", func(r Result) float64 { return r.ServerCPU }, "s", false, needFanout},
	{"loadgen CPU in fan-out", func(r Result) float64 { return r.ClientCPU }, "s", false, needFanout},
	{"load average at fan-out", func(r Result) float64 { return r.LoadAvg }, "f2", false, needFanout},
}

func pct(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// Table writes results side by side, plus edgemux/peer ratio columns for
// each peer when a result named "edgemux" is among them.
func Table(w io.Writer, results []Result) error {
	if len(results) == 0 {
		return ErrNoResult
	}
	base := -1
	for i, r := range results {
		if r.Server == "edgemux" {
			base = i
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t", labelWidth, "")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t", r.Server)
	}
	peers := ratioPeers(results, base)
	for _, p := range peers {
		fmt.Fprintf(tw, "edgemux/%s\t", results[p].Server)
	}
	fmt.Fprintln(tw)
	for _, rw := range rows {
		fmt.Fprintf(tw, "%-*s\t", labelWidth, rw.label)
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t", cell(rw, r))
		}
		for _, p := range peers {
			fmt.Fprintf(tw, "%s\t", ratioCell(rw, results[base], results[p]))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return notes(w, results)
}

func ratioPeers(results []Result, base int) []int {
	if base < 0 {
		return nil
	}
	var peers []int
	for i := range results {
		if i != base {
			peers = append(peers, i)
		}
	}
	return peers
}

// labelWidth pads the labels, so they read left-aligned in a table whose
// figures are right-aligned.
const labelWidth = 28

func cell(rw row, r Result) string {
	if !r.reached(rw.needs) {
		return "-"
	}
	return format(rw.value(r), rw.unit)
}

func ratioCell(rw row, a, b Result) string {
	if !rw.ratio {
		return ""
	}
	if !a.reached(rw.needs) || !b.reached(rw.needs) {
		return "-"
	}
	x, y := rw.value(a), rw.value(b)
	if y == 0 {
		return "-"
	}
	return format(x/y, "f2")
}

// format prints v in its unit; a figure that rounds to zero prints
// without a sign ("-0.000" reads as a dash).
func format(v float64, unit string) string {
	s := formatUnit(v, unit)
	num, _, _ := strings.Cut(s, " ")
	if strings.HasPrefix(num, "-") && strings.Trim(num, "-0.") == "" {
		return s[1:]
	}
	return s
}

func formatUnit(v float64, unit string) string {
	switch unit {
	case "MiB":
		return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + " MiB"
	case "B":
		return strconv.FormatFloat(v, 'f', 0, 64) + " B"
	case "x":
		return strconv.FormatFloat(v, 'f', 3, 64)
	case "/s":
		return strconv.FormatFloat(v, 'f', 0, 64) + "/s"
	case "%":
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case "s":
		return strconv.FormatFloat(v, 'f', 2, 64) + " s"
	case "us":
		return strconv.FormatFloat(v, 'f', 2, 64) + " us"
	case "f2":
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

func notes(w io.Writer, results []Result) error {
	for _, r := range results {
		var parts []string
		if !r.HeapForcedGC {
			parts = append(parts, "heap read without a forced GC (includes garbage not yet collected)")
		}
		if r.Note != "" {
			parts = append(parts, r.Note)
		}
		if len(parts) == 0 {
			continue
		}
		if _, err := fmt.Fprintf(w, "note %s: %s\n", r.Server, strings.Join(parts, "; ")); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}
