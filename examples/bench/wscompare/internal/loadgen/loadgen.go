// Package loadgen drives one WebSocket pub/sub server for the comparison:
// it opens N connections spread over loopback source addresses, subscribes
// each to one filter, proves every subscription live with a probe publish,
// samples the server's memory with all of them idle, then has one extra
// connection publish M messages and counts the deliveries.
//
// It runs in its own process, so its own memory never shows in the
// server's figures.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/memstat"
	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/report"
)

// Modes.
const (
	ModeIdle   = "idle"   // connect, measure, hold
	ModeFanout = "fanout" // connect, fan out, no memory samples
	ModeBoth   = "both"   // connect, measure, fan out, measure again
)

// Limits with safe defaults.
const (
	MaxConns     = 19000 // one process may hold 20,000 files
	MaxPublishes = 100000
	maxParallel  = 1024
	// peakInterval is how often the server's resident set is sampled
	// during the fan-out (the RssAnon/RssFile split of the peak; VmHWM
	// gives the peak itself exactly).
	peakInterval = 10 * time.Millisecond
)

// Sentinel errors.
var (
	ErrConfig   = errors.New("loadgen: invalid config")
	ErrDial     = errors.New("loadgen: dial failed")
	ErrNotReady = errors.New("loadgen: subscriptions not all live")
)

// Config of one run; zero fields take the defaults noted.
type Config struct {
	Server      string        // name in the result
	URL         string        // ws://host:port/ws (required)
	Conns       int           // idle subscribers (default 10000)
	Publishes   int           // fan-out publishes (default 200)
	Subprotocol string        // offered (default "edgemux.v1")
	FirstSource string        // first source address (default 127.0.0.2)
	PerSource   int           // connections per source address (default 2000)
	Parallel    int           // dials in flight (default 64)
	DialTimeout time.Duration // per dial, handshake included (default 10s)
	ReadyWithin time.Duration // all subscriptions live within (default 60s)
	Settle      time.Duration // quiet time before the idle sample (default 3s)
	Quiet       time.Duration // fan-out ends after this long without a delivery (default 5s)
	FanoutLimit time.Duration // fan-out ends after this long in all (default 120s)
	Mode        string        // ModeBoth (default), ModeIdle or ModeFanout
	Hold        time.Duration // idle mode: hold the connections this long after measuring
	PID         int           // server process to sample; 0 = no memory samples
	MetricsURL  string        // its heap/goroutine endpoint (Prometheus text)
	ForcedGC    bool          // the endpoint runs runtime.GC() before answering
	GCURL       string        // GET before each sample to force a GC (edgemux: /debug/pprof/heap?gc=1)
	Progress    io.Writer     // progress lines; nil discards
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Conns, 10000)
	def(&c.Publishes, 200)
	def(&c.PerSource, 2000)
	def(&c.Parallel, 64)
	defDur(&c.DialTimeout, 10*time.Second)
	defDur(&c.ReadyWithin, 60*time.Second)
	defDur(&c.Settle, 3*time.Second)
	defDur(&c.Quiet, 5*time.Second)
	defDur(&c.FanoutLimit, 120*time.Second)
	if c.Subprotocol == "" {
		c.Subprotocol = "edgemux.v1"
	}
	if c.FirstSource == "" {
		c.FirstSource = "127.0.0.2"
	}
	if c.Mode == "" {
		c.Mode = ModeBoth
	}
	if c.Server == "" {
		c.Server = "server"
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") {
		errs = append(errs, fmt.Errorf("%w: url %q", ErrConfig, c.URL))
	}
	if c.Conns > MaxConns {
		errs = append(errs, fmt.Errorf("%w: conns %d > %d", ErrConfig, c.Conns, MaxConns))
	}
	if c.Publishes > MaxPublishes {
		errs = append(errs, fmt.Errorf("%w: publishes %d > %d", ErrConfig, c.Publishes, MaxPublishes))
	}
	if c.Parallel > maxParallel {
		errs = append(errs, fmt.Errorf("%w: parallel %d > %d", ErrConfig, c.Parallel, maxParallel))
	}
	if _, err := SourceAddr(c.FirstSource, 0, c.PerSource); err != nil {
		errs = append(errs, err)
	}
	if _, err := SourceAddr(c.FirstSource, c.Conns-1, c.PerSource); err != nil {
		errs = append(errs, err)
	}
	switch c.Mode {
	case ModeIdle, ModeFanout, ModeBoth:
	default:
		errs = append(errs, fmt.Errorf("%w: mode %q", ErrConfig, c.Mode))
	}
	if c.Mode != ModeFanout && (c.PID <= 0 || c.MetricsURL == "") {
		errs = append(errs, fmt.Errorf("%w: mode %s needs pid and metrics url", ErrConfig, c.Mode))
	}
	return errors.Join(errs...)
}

// SourceAddr is the loopback source address of connection i: connections
// 0..per-1 from first, the next per from first+1, and so on, staying in
// 127.0.0.0/8.
func SourceAddr(first string, i, per int) (net.IP, error) {
	ip := net.ParseIP(first).To4()
	if ip == nil || ip[0] != 127 || per <= 0 || i < 0 {
		return nil, fmt.Errorf("%w: source %q, index %d, per %d", ErrConfig, first, i, per)
	}
	n := uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
	n += uint32(i / per)
	if n >= 1<<24-1 { // 127.255.255.255 is the broadcast address
		return nil, fmt.Errorf("%w: source %q + %d leaves 127.0.0.0/8", ErrConfig, first, i/per)
	}
	return net.IPv4(127, byte(n>>16), byte(n>>8), byte(n)).To4(), nil
}

// Run carries out one run and returns what it measured. The result is
// filled as far as the run got, also when it returns an error.
func Run(ctx context.Context, cfg Config) (report.Result, error) {
	cfg = cfg.withDefaults()
	res := report.Result{Server: cfg.Server, HeapForcedGC: cfg.ForcedGC, Publishes: cfg.Publishes}
	if err := cfg.validate(); err != nil {
		return res, err
	}
	httpc := &http.Client{Timeout: 30 * time.Second}
	sample := func(into *memstat.Sample, what string) error {
		if cfg.Mode == ModeFanout {
			return nil
		}
		// Two collections, as runtime.GC() twice would: the first moves
		// sync.Pool contents to the victim cache, the second frees them,
		// which an idle server's periodic GCs also do within minutes.
		for range 2 {
			if cfg.GCURL == "" {
				break
			}
			if _, err := memstat.Fetch(ctx, httpc, cfg.GCURL); err != nil {
				return fmt.Errorf("loadgen: %s forced GC: %w", what, err)
			}
		}
		s, err := memstat.Take(ctx, httpc, cfg.PID, cfg.MetricsURL)
		if err != nil {
			return fmt.Errorf("loadgen: %s sample: %w", what, err)
		}
		*into = s
		fmt.Fprintf(cfg.Progress, "%s: %s: rss %d KiB, heap %d KiB, goroutines %d\n",
			cfg.Server, what, s.RSS>>10, s.HeapInuse>>10, s.Goroutines)
		return nil
	}
	if err := sample(&res.Baseline, "baseline"); err != nil {
		return res, err
	}
	fl, err := open(ctx, cfg)
	if fl != nil {
		defer fl.close()
	}
	if err != nil {
		return res, err
	}
	res.Conns = len(fl.subs)
	if !sleepCtx(ctx, cfg.Settle) {
		return res, ctx.Err()
	}
	if err := sample(&res.Idle, "idle"); err != nil {
		return res, err
	}
	if cfg.Mode == ModeIdle {
		fmt.Fprintf(cfg.Progress, "%s: holding %d connections for %s\n", cfg.Server, res.Conns, cfg.Hold)
		sleepCtx(ctx, cfg.Hold)
		return res, nil
	}
	res.LoadAvg, _ = memstat.LoadAvg() // a figure for the reader, not worth failing the run
	cpu0 := cpuTimes(cfg.PID)
	var peak *memstat.Sampler
	if cfg.PID > 0 {
		peak = memstat.StartSampler(cfg.PID, peakInterval)
	}
	fo := fl.fanout(ctx, cfg)
	if peak != nil {
		res.PeakFanout = peak.Stop()
	}
	cpu1 := cpuTimes(cfg.PID)
	res.ServerCPU, res.ClientCPU = cpu1.server-cpu0.server, cpu1.client-cpu0.client
	res.Expected, res.Delivered, res.FanoutSecs = fo.expected, fo.delivered, fo.seconds
	notes := fl.notes()
	if fo.err != nil {
		notes = append(notes, fo.err.Error())
	}
	res.Note = strings.Join(notes, "; ")
	if err := sample(&res.AfterFanout, "after fan-out"); err != nil {
		return res, err
	}
	return res, nil
}

type cpuPair struct{ server, client float64 }

// cpuTimes reads the CPU time used so far by the server (pid; 0 = not
// known) and by this process. A figure that cannot be read stays 0.
func cpuTimes(pid int) cpuPair {
	var p cpuPair
	if pid > 0 {
		p.server, _ = memstat.CPUSeconds(pid)
	}
	p.client, _ = memstat.CPUSeconds(os.Getpid())
	return p
}

// sleepCtx sleeps d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
