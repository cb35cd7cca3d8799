// Command loadgen drives one WebSocket pub/sub server for the comparison
// (see internal/loadgen) and appends its result as one JSON line; with
// "report FILE" it prints the side-by-side table of such lines instead.
//
//	loadgen -server gorilla -url ws://127.0.0.1:5072/ws -pid 1234 \
//	    -metrics http://127.0.0.1:5072/debug/mem -forced-gc -out results.jsonl
//	loadgen report results.jsonl
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/loadgen"
	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/report"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "report" {
		if err := printReport(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		return
	}
	cfg, out := parseFlags()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := loadgen.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		if res.Note == "" {
			res.Note = err.Error()
		} else {
			res.Note += "; " + err.Error()
		}
	}
	if werr := writeResult(out, res); werr != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", werr)
		os.Exit(1)
	}
	if err != nil {
		os.Exit(1)
	}
}

func parseFlags() (loadgen.Config, string) {
	var c loadgen.Config
	flag.StringVar(&c.Server, "server", "server", "name of the server in the result")
	flag.StringVar(&c.URL, "url", "ws://127.0.0.1:5071/ws", "WebSocket URL")
	flag.IntVar(&c.Conns, "conns", 10000, "idle subscribers")
	flag.IntVar(&c.Publishes, "publishes", 200, "fan-out publishes")
	flag.StringVar(&c.Subprotocol, "subprotocol", "edgemux.v1", "subprotocol offered")
	flag.StringVar(&c.FirstSource, "source", "127.0.0.2", "first loopback source address")
	flag.IntVar(&c.PerSource, "per-source", 2000, "connections per source address")
	flag.IntVar(&c.Parallel, "parallel", 64, "dials in flight")
	flag.DurationVar(&c.Settle, "settle", 3*time.Second, "quiet time before the idle sample")
	flag.DurationVar(&c.Quiet, "quiet", 5*time.Second, "fan-out ends after this long without a delivery")
	flag.DurationVar(&c.FanoutLimit, "fanout-limit", 120*time.Second, "fan-out ends after this long in all")
	flag.DurationVar(&c.ReadyWithin, "ready-within", 60*time.Second, "all subscriptions live within")
	flag.StringVar(&c.Mode, "mode", loadgen.ModeBoth, "idle | fanout | both")
	flag.DurationVar(&c.Hold, "hold", 0, "idle mode: hold the connections this long")
	flag.IntVar(&c.PID, "pid", 0, "server process id (for VmRSS)")
	flag.StringVar(&c.MetricsURL, "metrics", "", "server heap/goroutine endpoint (Prometheus text)")
	flag.BoolVar(&c.ForcedGC, "forced-gc", false, "the metrics endpoint forces a GC first")
	flag.StringVar(&c.GCURL, "gc-url", "", "GET this before each sample to force a GC (then pass -forced-gc)")
	out := flag.String("out", "-", "append the result JSON line here (- = stdout)")
	flag.Parse()
	c.Progress = os.Stderr
	return c, *out
}

func writeResult(path string, res report.Result) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printReport(files []string) error {
	var all []report.Result
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		rs, err := report.Read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		all = append(all, rs...)
	}
	return report.Table(os.Stdout, all)
}
