// Command placement is the adversarial placement benchmark: bursty
// private-protocol devices connect in an order that stacks them on one
// worker under round-robin (every period-th connection is bursty, the
// period a multiple of the pool's workers), among steady bystanders. For
// each dispatch policy it starts an edgemux binary (a separate process),
// runs a first visit so that placement can learn the devices, makes every
// device reconnect in the same order, and measures the second visit:
// per-worker work per one-second window (max/min, from
// edgemux_worker_busy_seconds_total, each worker turn timed), events
// likewise, where the bursty devices sit, and the bystanders' round-trip
// latency, taken from each ping's scheduled send time (open loop: a late
// ping counts its lateness). With -slow and a -tags benchslow binary each
// bursty message costs its worker that long.
//
// Every device dials from its own loopback address (127.0.1.x bursty,
// 127.0.2.x steady), as devices on a network do; the gateway's history is
// keyed by source address.
//
//	go build -o /tmp/edgemux ./gateway/cmd/edgemux
//	go run ./examples/bench/placement -edgemux /tmp/edgemux
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
)

var verbose bool

// gateway is the running edgemux, ended with us on SIGTERM or SIGINT.
var gateway atomic.Pointer[os.Process]

func stopGatewayOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
	if p := gateway.Load(); p != nil {
		p.Signal(syscall.SIGTERM)
		p.Wait()
	}
	os.Exit(143)
}

type options struct {
	edgemux   string
	port      int
	policies  []string
	workers   int
	bursty    int
	steady    int
	train     int
	pause     time.Duration
	interval  time.Duration
	warm      time.Duration
	duration  time.Duration
	keepFiles bool
	slow      time.Duration
	period    int
}

func main() {
	var o options
	var policies string
	flag.StringVar(&o.edgemux, "edgemux", "", "edgemux binary (required)")
	flag.IntVar(&o.port, "port", 7411, "gateway port")
	flag.StringVar(&policies, "policies", "roundrobin,leastconns,entropy", "dispatch policies to run, in order")
	flag.IntVar(&o.workers, "workers", 4, "workers in the private pool (N)")
	flag.IntVar(&o.bursty, "bursty", 8, "bursty devices")
	flag.IntVar(&o.period, "period", 0, "every period-th connection is bursty; 0 = 2N, so round-robin stacks every bursty device on one worker beside as many bystanders")
	flag.IntVar(&o.steady, "steady", 0, "steady bystanders; 0 = bursty*(period-1)")
	flag.IntVar(&o.train, "train", 64, "back-to-back pings per burst")
	flag.DurationVar(&o.pause, "pause", 50*time.Millisecond, "pause between a bursty device's trains")
	flag.DurationVar(&o.interval, "interval", 10*time.Millisecond, "a bystander's ping interval")
	flag.DurationVar(&o.warm, "warm", 3*time.Second, "first visit, for learning")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured second visit")
	flag.BoolVar(&o.keepFiles, "keep", false, "keep the config and log files")
	flag.DurationVar(&o.slow, "slow", 0, "each bursty message costs its worker this long (needs a -tags benchslow binary); 0 = off")
	flag.BoolVar(&verbose, "v", false, "print each worker's counted work once the second visit is placed")
	flag.Parse()
	if o.edgemux == "" {
		fmt.Fprintln(os.Stderr, "placement: -edgemux is required")
		os.Exit(2)
	}
	if o.period <= 0 {
		o.period = 2 * o.workers
	}
	if o.period%o.workers != 0 {
		fmt.Fprintln(os.Stderr, "placement: -period must be a multiple of -workers, or round-robin does not stack")
		os.Exit(2)
	}
	if o.steady == 0 {
		o.steady = o.bursty * (o.period - 1)
	}
	o.policies = strings.Split(policies, ",")
	go stopGatewayOnSignal()
	fmt.Printf("placement: workers=%d period=%d bursty=%d steady=%d train=%d pause=%s interval=%s warm=%s duration=%s slow=%s\n",
		o.workers, o.period, o.bursty, o.steady, o.train, o.pause, o.interval, o.warm, o.duration, o.slow)
	fmt.Printf("%-11s %8s %14s %8s %14s %10s %9s %9s %9s %8s\n", "policy", "busy_max/min", "busy_share_%", "ev_max/min", "ev_share_%", "bursty_at", "p50_ms", "p99_ms", "p999_ms", "pings")
	for _, p := range o.policies {
		r, err := runPolicy(o, p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "placement: %s: %v\n", p, err)
			os.Exit(1)
		}
		fmt.Printf("%-11s %12.2f %14s %10.2f %14s %10s %9.3f %9.3f %9.3f %8d\n", p, r.ratio, r.shares,
			r.evRatio, r.evShares, r.burstyAt, ms(r.p50), ms(r.p99), ms(r.p999), r.pings)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type result struct {
	ratio          float64 // mean over windows of max/min worker busy time
	shares         string  // each worker's share of the busy time, whole run
	evRatio        float64 // the same for events handled
	evShares       string
	burstyAt       string // bursty devices per worker in the measured visit
	p50, p99, p999 time.Duration
	pings          int
}

// burstyNet holds every bursty device's source address (127.0.1.x).
const burstyNet = "127.0.1.0/24"

// checkSlow makes sure a -slow run really has slow bursty devices: a
// binary built without -tags benchslow ignores the variable, and its
// figures would pass for the slow run's.
func checkSlow(o options, logName string) error {
	if o.slow <= 0 {
		return nil
	}
	log, err := os.ReadFile(logName)
	if err != nil {
		return err
	}
	if !strings.Contains(string(log), "benchmark build: every private Data call (from "+burstyNet+")") {
		return fmt.Errorf("-slow %s: %s is not a -tags benchslow build (its log does not say the knob is on)", o.slow, o.edgemux)
	}
	return nil
}

// runPolicy starts a gateway under policy, runs both visits and returns
// the second visit's figures.
func runPolicy(o options, policy string) (result, error) {
	dir, err := os.MkdirTemp("", "placement-bench-")
	if err != nil {
		return result{}, err
	}
	if !o.keepFiles {
		defer os.RemoveAll(dir)
	}
	cfg := filepath.Join(dir, "edgemux.yaml")
	if err := os.WriteFile(cfg, []byte(gatewayConfig(o, policy)), 0o644); err != nil {
		return result{}, err
	}
	logf, err := os.Create(filepath.Join(dir, "edgemux.log"))
	if err != nil {
		return result{}, err
	}
	defer logf.Close()
	cmd := exec.Command(o.edgemux, "run", "-c", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if o.slow > 0 {
		cmd.Env = append(os.Environ(), "EDGEMUX_BENCH_SLOW=private:"+o.slow.String()+"@"+burstyNet)
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	gateway.Store(cmd.Process)
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	addr := fmt.Sprintf("127.0.0.1:%d", o.port)
	if err := waitUp(addr); err != nil {
		return result{}, err
	}
	if err := checkSlow(o, logf.Name()); err != nil {
		return result{}, err
	}
	// First visit: placement learns (under entropy; the others ignore it).
	if _, err := visit(o, addr, o.warm, nil); err != nil {
		return result{}, fmt.Errorf("first visit: %w", err)
	}
	// Second visit, measured.
	var windows [][]float64
	var burstyAt string
	var workerOf map[string]int
	byDevice, err := visit(o, addr, o.duration, func(stop <-chan struct{}) {
		burstyAt, workerOf = placed(addr, o.workers)
		windows = sampleBusy(addr, o.workers, stop)
	})
	if err != nil {
		return result{}, fmt.Errorf("second visit: %w", err)
	}
	if verbose {
		printByWorker(byDevice, workerOf, o.workers)
	}
	var lat []time.Duration
	for _, l := range byDevice {
		lat = append(lat, l...)
	}
	r := result{pings: len(lat), burstyAt: burstyAt}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50, r.p99, r.p999 = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)*999/1000]
	}
	var busyW, eventW [][]float64
	for _, w := range windows {
		busyW, eventW = append(busyW, w[:o.workers]), append(eventW, w[o.workers:])
	}
	r.ratio, r.shares = busyFigures(busyW)
	r.evRatio, r.evShares = busyFigures(eventW)
	return r, nil
}

func gatewayConfig(o options, policy string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:%d
limits:
  max_conns: 19000
dispatch:
  policy: %s
pools:
  private:
    workers: %d
    pattern: ""
log:
  level: warn
`, o.port, policy, o.workers)
}

func waitUp(addr string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := scrape(addr); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("gateway at %s did not come up", addr)
}

// visit connects every device in the adversarial order (one by one, each
// placed before the next dials), runs traffic for d and closes them all.
// during, if set, runs alongside the traffic until it stops. It returns
// the bystanders' latencies.
func visit(o options, addr string, d time.Duration, during func(stop <-chan struct{})) (map[string][]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	var devices []*device
	defer func() {
		for _, dv := range devices {
			dv.c.Close()
		}
	}()
	b, s := 0, 0
	for i := 0; b < o.bursty || s < o.steady; i++ {
		bursty := (i%o.period == o.period-1 && b < o.bursty) || s >= o.steady
		var from string
		if bursty {
			b++
			from = fmt.Sprintf("127.0.1.%d", b)
		} else {
			s++
			from = fmt.Sprintf("127.0.%d.%d", 2+s/250, 1+s%250)
		}
		c, err := dialFrom(ctx, addr, from)
		if err != nil {
			return nil, err
		}
		// One round trip: the connection is placed before the next one dials.
		if err := c.Ping(ctx); err != nil {
			return nil, err
		}
		devices = append(devices, &device{c: c, bursty: bursty, from: from})
	}
	if during != nil && verbose {
		if body, err := scrape(addr); err == nil {
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, "edgemux_worker_work{pool=\"private\"") {
					fmt.Fprintln(os.Stderr, "  placed:", line)
				}
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	lat := map[string][]time.Duration{}
	var firstErr error
	for _, dv := range devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := dv.run(ctx, o, stop)
			mu.Lock()
			if !dv.bursty {
				lat[dv.from] = l
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}()
	}
	done := make(chan struct{})
	if during != nil {
		go func() { during(stop); close(done) }()
	} else {
		close(done)
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	<-done
	return lat, firstErr
}

func dialFrom(ctx context.Context, addr, from string) (*private.Client, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	return private.Dial(ctx, addr, "dev-"+from, private.ClientOptions{Dialer: d, Timeout: 30 * time.Second})
}

type device struct {
	c      *private.Client
	bursty bool
	from   string // its source address, unique
}

// run sends until stop: a bursty device trains of back-to-back pings with
// a pause between; a bystander one ping per interval on a fixed schedule,
// latency measured from the scheduled time.
func (dv *device) run(ctx context.Context, o options, stop <-chan struct{}) ([]time.Duration, error) {
	var lat []time.Duration
	next := time.Now()
	for {
		select {
		case <-stop:
			return lat, nil
		default:
		}
		if dv.bursty {
			for range o.train {
				if err := dv.c.Ping(ctx); err != nil {
					return nil, err
				}
			}
			time.Sleep(o.pause)
			continue
		}
		next = next.Add(o.interval)
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		if err := dv.c.Ping(ctx); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(next))
	}
}

// sampleBusy scrapes each worker's busy seconds once a second until stop
// and returns the per-window deltas.
func sampleBusy(addr string, workers int, stop <-chan struct{}) [][]float64 {
	var windows [][]float64
	prev, _ := busy(addr, workers)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return windows
		case <-t.C:
		}
		cur, err := busy(addr, workers)
		if err != nil || prev == nil {
			prev = cur
			continue
		}
		w := make([]float64, 2*workers)
		for i := range w {
			w[i] = cur[i] - prev[i]
		}
		windows = append(windows, w)
		prev = cur
	}
}

// busy returns each worker's busy seconds followed by its events, from
// one scrape: 2*workers numbers.
func busy(addr string, workers int) ([]float64, error) {
	body, err := scrape(addr)
	if err != nil {
		return nil, err
	}
	out := make([]float64, 2*workers)
	for _, line := range strings.Split(body, "\n") {
		for k, series := range []string{"edgemux_worker_busy_seconds_total", "edgemux_worker_events_total"} {
			prefix := series + `{pool="private",worker="`
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			var i int
			var v float64
			rest := strings.Replace(strings.TrimPrefix(line, prefix), `"} `, " ", 1)
			if _, err := fmt.Sscanf(rest, "%d %g", &i, &v); err == nil && i < workers {
				out[k*workers+i] = v
			}
		}
	}
	return out, nil
}

// placed reads the gateway's registry view: how many bursty devices each
// worker of the pool holds ("2/2/2/2") and each device's worker (by source
// address), the workers numbered 0.. in the order of their global numbers.
func placed(addr string, workers int) (string, map[string]int) {
	body, err := get(addr, "/debug/registry?max=20000")
	if err != nil {
		return "-", nil
	}
	var reg struct {
		Slots []struct {
			Worker int    `json:"worker"`
			Peer   string `json:"peer"`
		} `json:"slots"`
	}
	if json.Unmarshal([]byte(body), &reg) != nil {
		return "-", nil
	}
	bursty, global := map[int]int{}, map[string]int{}
	for _, s := range reg.Slots {
		ip, _, _ := strings.Cut(s.Peer, ":")
		if s.Worker < 0 || !strings.HasPrefix(ip, "127.0.") || strings.HasPrefix(ip, "127.0.0.") {
			continue // not a device (the scrape itself, say)
		}
		global[ip] = s.Worker
		bursty[s.Worker] += 0
		if strings.HasPrefix(ip, "127.0.1.") {
			bursty[s.Worker]++
		}
	}
	ids := slices.Sorted(maps.Keys(bursty))
	if len(ids) != workers {
		return fmt.Sprintf("%d-workers", len(ids)), nil
	}
	parts := make([]string, len(ids))
	local := map[string]int{}
	for i, id := range ids {
		parts[i] = fmt.Sprint(bursty[id])
		for ip, w := range global {
			if w == id {
				local[ip] = i
			}
		}
	}
	return strings.Join(parts, "/"), local
}

// printByWorker prints, for each worker, its bystanders and their p99.
func printByWorker(byDevice map[string][]time.Duration, workerOf map[string]int, workers int) {
	lat := make([][]time.Duration, workers)
	n := make([]int, workers)
	for from, l := range byDevice {
		w, ok := workerOf[from]
		if !ok {
			continue
		}
		n[w]++
		lat[w] = append(lat[w], l...)
	}
	for w := range lat {
		slices.Sort(lat[w])
		p99 := time.Duration(0)
		if len(lat[w]) > 0 {
			p99 = lat[w][len(lat[w])*99/100]
		}
		fmt.Fprintf(os.Stderr, "  worker %d: %d bystanders, p99 %.3f ms\n", w, n[w], ms(p99))
	}
}

func scrape(addr string) (string, error) { return get(addr, "/metrics") }

func get(addr, path string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", path, resp.Status)
	}
	return string(b), err
}

// busyFigures is the mean over windows of max/min worker busy time (a
// window where a worker did nothing at all counts as its ratio to 1 µs),
// and each worker's share of the whole.
func busyFigures(windows [][]float64) (float64, string) {
	if len(windows) == 0 {
		return 0, "-"
	}
	var sum float64
	total := make([]float64, len(windows[0]))
	for _, w := range windows {
		lo, hi := w[0], w[0]
		for i, v := range w {
			lo, hi = min(lo, v), max(hi, v)
			total[i] += v
		}
		sum += hi / max(lo, 1e-6)
	}
	var all float64
	for _, v := range total {
		all += v
	}
	parts := make([]string, len(total))
	for i, v := range total {
		parts[i] = fmt.Sprintf("%.0f", 100*v/max(all, 1e-9))
	}
	return sum / float64(len(windows)), strings.Join(parts, "/")
}
