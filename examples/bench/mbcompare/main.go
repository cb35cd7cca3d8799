// Command mbcompare measures edgemux's Modbus side by side with plain Go
// in one run (make mbcompare), each side a process of its own:
//
//   - poll: the simulator (examples/mbsim) with 500 devices x 30 tags in
//     one process; edgemux's poller on the production path (the gateway
//     started from YAML, a bus subscriber counting the published tags) in
//     another; then a plain goburrow client loop (modbus.NewClient per
//     device, the tags decoded by hand) in a third. Tags per second, CPU
//     and peak RSS of each, and the ratio.
//   - serve: 100 closed-loop Modbus TCP masters (a raw loop, a process of
//     their own) reading holding registers from edgemux's register map
//     over live bus tags, then from a plain goroutine-per-connection Go
//     server (mbsim's). Requests per second, latency, CPU and peak RSS.
//
// The modes the run starts as processes (sim, poll, serve, masters) can
// be run by hand too; see the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/edgemux/edgemux/examples/mbsim"
)

type flags struct {
	rows       string
	devices    int
	interval   time.Duration
	intervals  string
	warmup     time.Duration
	duration   time.Duration
	impl       string
	addrs      string
	addr       string
	masters    int
	regs       int
	cpuProfile string
	memProfile string
}

func main() {
	mode := "run"
	args := os.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	var f flags
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	fs.StringVar(&f.rows, "rows", "poll,serve", "run: which comparisons")
	fs.IntVar(&f.devices, "devices", 500, "simulated devices")
	fs.DurationVar(&f.interval, "interval", 10*time.Millisecond, "poll: the poll interval")
	fs.StringVar(&f.intervals, "intervals", "10ms,500ms", "run: poll intervals, a table each (10ms, the gateway's least, polls as fast as the devices answer; 500ms is 30,000 tags/s, the top of Neuron's range)")
	fs.DurationVar(&f.warmup, "warmup", 3*time.Second, "before measuring")
	fs.DurationVar(&f.duration, "duration", 15*time.Second, "measured window")
	fs.StringVar(&f.impl, "impl", "edgemux", "poll: edgemux | goburrow; serve: edgemux | mbsim")
	fs.StringVar(&f.addrs, "addrs", "", "poll: file of the simulator's \"device I ADDR\" lines")
	fs.StringVar(&f.addr, "addr", "", "masters: server address")
	fs.IntVar(&f.masters, "masters", 100, "concurrent masters")
	fs.IntVar(&f.regs, "regs", 20, "registers per master read")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "poll and serve -impl edgemux: write a CPU profile here (poll: of the window)")
	fs.StringVar(&f.memProfile, "memprofile", "", "poll -impl edgemux: write a heap profile at the end of the window here")
	fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := runMode(ctx, mode, f); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "mbcompare:", err)
		os.Exit(1)
	}
}

func runMode(ctx context.Context, mode string, f flags) error {
	w := window{warmup: f.warmup, length: f.duration}
	switch mode {
	case "run":
		return run(ctx, f)
	case "sim":
		return sim(ctx, f.devices)
	case "poll":
		addrs, err := readAddrs(f.addrs)
		if err != nil {
			return err
		}
		if f.impl == "goburrow" {
			return pollGoburrow(ctx, addrs, f.interval, w)
		}
		return pollEdgemux(ctx, addrs, f.interval, w, f.cpuProfile, f.memProfile)
	case "serve":
		return serve(ctx, f.impl, f.cpuProfile)
	case "masters":
		return masters(ctx, f.addr, f.masters, f.regs, w)
	}
	return fmt.Errorf("unknown mode %q (run, sim, poll, serve, masters)", mode)
}

// sim runs the simulator until ctx ends, printing its devices and "ready".
func sim(ctx context.Context, devices int) error {
	s, err := mbsim.Start(mbsim.Config{Devices: devices})
	if err != nil {
		return err
	}
	defer s.Close()
	var b strings.Builder
	for i, a := range s.Addrs() {
		fmt.Fprintf(&b, "device %d %s\n", i, a)
	}
	fmt.Print(b.String())
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}

// run is the whole comparison: each row's processes in turn, a table each.
func run(ctx context.Context, f flags) error {
	load, _ := os.ReadFile("/proc/loadavg")
	host, _ := os.Hostname()
	fmt.Printf("mbcompare %s on %s, %d cores, load average %s\n", time.Now().UTC().Format("2006-01-02T15:04Z"), host, numCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
	for _, row := range strings.Split(f.rows, ",") {
		var err error
		switch row {
		case "poll":
			err = runPoll(ctx, f)
		case "serve":
			err = runServe(ctx, f)
		default:
			err = fmt.Errorf("unknown row %q", row)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runPoll starts the simulator, then each poller against it in turn.
func runPoll(ctx context.Context, f flags) error {
	s, err := start("sim", "-devices", fmt.Sprint(f.devices))
	if err != nil {
		return err
	}
	defer s.stop()
	var lines []string
	if _, err := s.await("ready", time.Minute, func(l string) { lines = append(lines, l) }); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mbcompare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	addrs := filepath.Join(dir, "devices")
	if err := os.WriteFile(addrs, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	for _, iv := range strings.Split(f.intervals, ",") {
		d, err := time.ParseDuration(iv)
		if err != nil {
			return err
		}
		f.interval = d
		if err := pollTable(ctx, f, s.pid(), addrs); err != nil {
			return err
		}
	}
	return nil
}

// pollTable runs each poller in turn against the simulator (pid sim)
// at f.interval and prints their figures and the ratio.
func pollTable(ctx context.Context, f flags, sim int, addrs string) error {
	fmt.Printf("\nModbus polling: %d simulated devices x %d tags (%d registers, one read each), interval %v, %v measured after %v\n",
		f.devices, len(mbsim.Tags), mbsim.Registers, f.interval, f.duration, f.warmup)
	fmt.Printf("%-9s %10s %9s %10s %12s %11s %9s\n", "poller", "tags/s", "bad", "cpu_cores", "tags/cpu_s", "rss_peak_MB", "sim_cores")
	res := map[string]map[string]float64{}
	for _, impl := range []string{"edgemux", "goburrow"} {
		args := []string{"poll", "-impl", impl, "-addrs", addrs, "-interval", f.interval.String(),
			"-warmup", f.warmup.String(), "-duration", f.duration.String()}
		if impl == "edgemux" && f.cpuProfile != "" {
			args = append(args, "-cpuprofile", f.cpuProfile)
		}
		r, simCPU, err := measured(ctx, sim, f.warmup+f.duration, args...)
		if err != nil {
			return err
		}
		secs := r["seconds"]
		r["tags_s"] = r["tags"] / secs
		r["cores"] = r["cpu_s"] / secs
		r["per_cpu"] = r["tags"] / max(r["cpu_s"], 0.01)
		r["rss_mb"] = r["rss_peak_kb"] / 1024
		fmt.Printf("%-9s %10.0f %9.0f %10.2f %12.0f %11.1f %9.2f\n", impl, r["tags_s"], r["bad"], r["cores"], r["per_cpu"], r["rss_mb"], simCPU/secs)
		res[impl] = r
	}
	e, g := res["edgemux"], res["goburrow"]
	fmt.Printf("ratio edgemux/goburrow: tags/s %.2f, tags per CPU-second %.2f, peak RSS %.2f\n",
		e["tags_s"]/g["tags_s"], e["per_cpu"]/g["per_cpu"], e["rss_mb"]/g["rss_mb"])
	fmt.Println("(edgemux: polled, decoded, published as JSON with quality and timestamp to the bus, counted by a subscriber;")
	fmt.Println(" goburrow: polled and decoded to float64s. sim_cores: the simulator's CPU over the same window.)")
	return nil
}

// measured runs one measuring child to its result line and returns the
// line's fields and the CPU seconds process other used over its window.
func measured(ctx context.Context, other int, expect time.Duration, args ...string) (map[string]float64, float64, error) {
	c, err := start(args...)
	if err != nil {
		return nil, 0, err
	}
	defer c.stop()
	if _, err := c.await("window start", expect+time.Minute, nil); err != nil {
		return nil, 0, err
	}
	cpu0, err := cpuSeconds(other)
	if err != nil {
		return nil, 0, err
	}
	line, err := c.await("result", expect+time.Minute, nil)
	if err != nil {
		return nil, 0, err
	}
	cpu1, err := cpuSeconds(other)
	if err != nil {
		return nil, 0, err
	}
	out := map[string]float64{}
	for k := range fields(line) {
		out[k] = num(fields(line), k)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return out, cpu1 - cpu0, nil
}

// runServe starts each server in turn and the masters against it.
func runServe(ctx context.Context, f flags) error {
	fmt.Printf("\nModbus TCP server: %d closed-loop masters (a process of their own), FC 3 of %d registers, %v measured after %v\n",
		f.masters, f.regs, f.duration, f.warmup)
	fmt.Printf("%-9s %10s %8s %8s %8s %10s %11s %13s %7s\n", "server", "req/s", "p50_ms", "p99_ms", "max_ms", "cpu_cores", "rss_peak_MB", "masters_cores", "errors")
	rps := map[string]float64{}
	for _, impl := range []string{"edgemux", "mbsim"} {
		s, err := start("serve", "-impl", impl)
		if err != nil {
			return err
		}
		line, err := s.await("listening", time.Minute, nil)
		if err != nil {
			s.stop()
			return err
		}
		addr := strings.Fields(line)[1]
		m, err := start("masters", "-addr", addr, "-masters", fmt.Sprint(f.masters), "-regs", fmt.Sprint(f.regs),
			"-warmup", f.warmup.String(), "-duration", f.duration.String())
		if err != nil {
			s.stop()
			return err
		}
		r, cpu, hwm, mcpu, err := serveWindow(s, m, f.warmup+f.duration)
		m.stop()
		s.stop()
		if err != nil {
			return err
		}
		secs := num(r, "seconds")
		rps[impl] = num(r, "rps")
		fmt.Printf("%-9s %10.0f %8.2f %8.2f %8.2f %10.2f %11.1f %13.2f %7.0f\n", impl, num(r, "rps"), num(r, "p50_ms"), num(r, "p99_ms"),
			num(r, "max_ms"), cpu/secs, float64(hwm)/1024, mcpu/secs, num(r, "errors"))
	}
	fmt.Printf("ratio edgemux/mbsim: req/s %.2f\n", rps["edgemux"]/rps["mbsim"])
	fmt.Println("(mbsim: a plain Go Modbus TCP server, a goroutine per connection, registers encoded on every read;")
	fmt.Println(" edgemux: the gateway's register map over 30 bus tags republished every 10 ms, its default 2 modbus workers.)")
	return nil
}

// serveWindow samples the server's and the masters' CPU over the masters'
// window; it returns the masters' result, those CPU seconds and the
// server's peak RSS in kB.
func serveWindow(s, m *child, expect time.Duration) (r map[string]string, cpu float64, hwm int, mcpu float64, err error) {
	if _, err = m.await("window start", expect+time.Minute, nil); err != nil {
		return
	}
	c0, err := cpuSeconds(s.pid())
	if err != nil {
		return
	}
	mc0, err := cpuSeconds(m.pid())
	if err != nil {
		return
	}
	line, err := m.await("result", expect+time.Minute, nil)
	if err != nil {
		return
	}
	c1, _ := cpuSeconds(s.pid())
	mc1, _ := cpuSeconds(m.pid())
	hwm, err = statusKB(s.pid(), "VmHWM")
	return fields(line), c1 - c0, hwm, mc1 - mc0, err
}
