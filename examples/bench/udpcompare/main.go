// Command udpcompare runs one small app (64-byte reliable telemetry and
// echo messages) over four UDP stacks in one run and prints them side by
// side: edgemux's reliable UDP core (rudp, served by the gateway's
// production datagram path), kcp-go in its fast mode and with its
// defaults, and quic-go. Three rows:
//
//  1. telemetry under loss: 50 sessions, 64 B every 20 ms, through an
//     in-process lossy relay (10 ms each way, Bernoulli loss each way) at
//     5, 10 and 20 % loss: delivery, p50/p99 latency, wire bytes per
//     payload byte;
//
//  2. idle sessions: memory per session and idle CPU of the server;
//
//  3. 64 B echo messages per CPU-second, no loss, no relay.
//
//     go run . -duration 20s
//
// Loopback only. See README.md in examples/bench for what it prints.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if childMain() {
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "udpcompare:", err)
		os.Exit(1)
	}
}

type options struct {
	stacks    []stack
	rows      map[string]bool
	telemetry telemetryConfig
	losses    []float64
	idle      idleConfig
	idleRUDP  int
	idlePeers int
	echo      echoConfig
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("udpcompare", flag.ContinueOnError)
	names := fs.String("stacks", "rudp,kcp-fast,kcp-default,quic", "stacks to run, rudp first")
	rows := fs.String("rows", "telemetry,idle,echo", "rows to run")
	fs.IntVar(&o.telemetry.sessions, "sessions", 50, "telemetry sessions")
	fs.DurationVar(&o.telemetry.period, "period", 20*time.Millisecond, "telemetry: between a session's messages")
	fs.DurationVar(&o.telemetry.duration, "duration", 20*time.Second, "telemetry: how long each run sends")
	fs.DurationVar(&o.telemetry.drain, "drain", 10*time.Second, "telemetry: how long to wait for the last messages")
	fs.DurationVar(&o.telemetry.delay, "delay", 10*time.Millisecond, "relay delay each way")
	fs.Uint64Var(&o.telemetry.seed, "seed", 1, "relay loss seed")
	losses := fs.String("losses", "5,10,20", "loss each way, percent")
	fs.IntVar(&o.idleRUDP, "idle-rudp", 100000, "idle sessions for rudp")
	fs.IntVar(&o.idlePeers, "idle-peers", 10000, "idle sessions for kcp-go and quic-go")
	fs.IntVar(&o.idle.sockets, "idle-sockets", 16, "client sockets the idle sessions share")
	fs.DurationVar(&o.idle.idle, "idle-for", 60*time.Second, "idle CPU window (a multiple of every stack's keepalive cycle: rudp 10 s by default, its keepalives alternately quiet and asking, so 20 s; kcp-go and quic-go 10 s)")
	fs.DurationVar(&o.idle.settle, "settle", 30*time.Second, "quiet before measuring idle memory (past a whole keepalive cycle)")
	fs.DurationVar(&o.idle.setup, "idle-setup", 5*time.Minute, "at most, to open the idle sessions")
	keepalive := fs.Duration("rudp-keepalive", 0, "rudp's keepalive, both ends (0: the default, 10 s; the large-fleet setting is 25s)")
	idleTimeout := fs.Duration("rudp-idle-timeout", 0, "rudp's idle timeout, both ends (0: the default, 30 s; the large-fleet setting is 75s)")
	receiveDelay := fs.Duration("receive-delay", -1, "the rudp server's udp.receive_delay (negative: the gateway's default)")
	receiveDelayIdle := fs.Duration("receive-delay-idle", -1, "the rudp server's udp.receive_delay_idle (negative: the gateway's default; 0: off)")
	fs.IntVar(&o.echo.sessions, "echo-sessions", 50, "echo sessions")
	fs.IntVar(&o.echo.window, "echo-window", 4, "echo messages in flight per session")
	fs.DurationVar(&o.echo.duration, "echo-for", 10*time.Second, "echo run length")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	// The child server reads them from its environment (rudpConfig).
	if *keepalive > 0 {
		os.Setenv(envRUDPKeepalive, keepalive.String())
	}
	if *idleTimeout > 0 {
		os.Setenv(envRUDPIdleTimeout, idleTimeout.String())
	}
	if *receiveDelay >= 0 {
		os.Setenv(envReceiveDelay, receiveDelay.String())
	}
	if *receiveDelayIdle >= 0 {
		os.Setenv(envReceiveDelayIdle, receiveDelayIdle.String())
	}
	for _, n := range strings.Split(*names, ",") {
		st, ok := stackNamed(n)
		if !ok {
			return o, fmt.Errorf("-stacks: no stack %q", n)
		}
		o.stacks = append(o.stacks, st)
	}
	o.rows = map[string]bool{}
	for _, r := range strings.Split(*rows, ",") {
		if r != "telemetry" && r != "idle" && r != "echo" {
			return o, fmt.Errorf("-rows: no row %q", r)
		}
		o.rows[r] = true
	}
	for _, s := range strings.Split(*losses, ",") {
		p, err := strconv.ParseFloat(s, 64)
		if err != nil || p < 0 || p >= 100 {
			return o, fmt.Errorf("-losses: %q is not a percentage below 100", s)
		}
		o.losses = append(o.losses, p/100)
	}
	return o, nil
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	names := make([]string, len(o.stacks))
	for i, st := range o.stacks {
		names[i] = st.name
	}
	host, _ := os.Hostname()
	fmt.Printf("udpcompare %s, %s, GOMAXPROCS %d, load %s\n", time.Now().UTC().Format(time.RFC3339), host, gomaxprocs(), loadavg())
	var g goals
	if o.rows["telemetry"] {
		t := o.telemetry
		fmt.Printf("\n== telemetry: %d sessions, %d B every %v for %v, %v each way (RTT %v), Bernoulli loss each way; latency: client send -> server app\n",
			t.sessions, msgSize, t.period, t.duration, t.delay, 2*t.delay)
		for _, loss := range o.losses {
			t.loss = loss
			rs := make([]telemetryResult, len(o.stacks))
			for i, st := range o.stacks {
				r, err := runTelemetry(st, t)
				if err != nil {
					fmt.Printf("  %s at %g %%: %v\n", st.name, 100*loss, err)
				}
				rs[i] = r
				fmt.Fprintf(os.Stderr, "  telemetry %s %g%%: sent %d, delivered %d, dups %d, gaps %d, bad %d, send errors %d\n",
					st.name, 100*loss, r.sent, r.sum.delivered, r.sum.dups, r.sum.gaps, r.sum.bad, r.sendErrors)
			}
			fmt.Printf("\n-- %g %% loss each way\n", 100*loss)
			table(os.Stdout, names, telemetryLines(rs))
			g.telemetry(loss, rs)
		}
	}
	if o.rows["idle"] {
		fmt.Printf("\n== idle: sessions over %d shared client sockets, one message each, then idle; server in its own process; memory after %v quiet, CPU over %v\n",
			o.idle.sockets, o.idle.settle, o.idle.idle)
		rs := make([]idleResult, len(o.stacks))
		for i, st := range o.stacks {
			cfg := o.idle
			cfg.sessions = o.idlePeers
			if st.name == "rudp" {
				cfg.sessions = o.idleRUDP
			}
			r, err := runIdle(st, cfg)
			if err != nil {
				fmt.Printf("  %s: %v\n", st.name, err)
			}
			rs[i] = r
		}
		table(os.Stdout, names, idleLines(rs))
		g.idle(rs)
	}
	if o.rows["echo"] {
		e := o.echo
		fmt.Printf("\n== echo: %d sessions, %d messages of %d B in flight each, %v, no loss, no relay; server in its own process\n",
			e.sessions, e.window, msgSize, e.duration)
		rs := make([]echoResult, len(o.stacks))
		for i, st := range o.stacks {
			r, err := runEcho(st, e)
			if err != nil {
				fmt.Printf("  %s: %v\n", st.name, err)
			}
			if r.bad > 0 {
				fmt.Printf("  %s: %d echoes were not what was sent\n", st.name, r.bad)
			}
			rs[i] = r
		}
		table(os.Stdout, names, echoLines(rs))
		g.echo(rs)
	}
	g.print()
	return nil
}

// goals are the targets for rudp, met or missed.
type goals struct{ lines []string }

func (g *goals) add(ok bool, format string, args ...any) {
	mark := "missed"
	if ok {
		mark = "met   "
	}
	g.lines = append(g.lines, mark+"  "+fmt.Sprintf(format, args...))
}

func (g *goals) telemetry(loss float64, rs []telemetryResult) {
	r, ok := find(rs, func(r telemetryResult) string { return r.stack })
	if !ok || r.sent == 0 {
		return
	}
	p99 := ms(percentile(r.sum.latencies, 99))
	switch pct := math.Round(100 * loss); pct {
	case 10:
		g.add(p99 <= 80 && r.complete(), "p99 <= 80 ms at 10 %% loss with 100 %% delivery: %.1f ms, %d/%d", p99, r.sum.delivered, r.sent)
	case 20:
		g.add(p99 <= 150 && r.complete(), "p99 <= 150 ms at 20 %% loss with 100 %% delivery: %.1f ms, %d/%d", p99, r.sum.delivered, r.sent)
	case 5:
		g.add(r.wireBoth() <= 1.15, "<= 1.15 wire bytes per payload byte at 5 %% loss: %.2f both ways (%.2f client -> server)", r.wireBoth(), r.wireUp())
	}
}

func (g *goals) idle(rs []idleResult) {
	r, ok := find(rs, func(r idleResult) string { return r.stack })
	if !ok || r.asked == 0 {
		return
	}
	g.add(r.heapPerSession() <= 2048 && r.rssPerSession() <= 2048, "<= 2 KiB per idle session: %.0f B heap+stacks, %.0f B RSS, at %d sessions", r.heapPerSession(), r.rssPerSession(), r.held)
	g.add(r.cpuIdle <= 0.01 && r.held >= 100000, "<= 1 %% of a core idle at 100k sessions: %.2f %% at %d", 100*r.cpuIdle, r.held)
}

func (g *goals) echo(rs []echoResult) {
	r, ok := find(rs, func(r echoResult) string { return r.stack })
	if !ok || r.echoes == 0 {
		return
	}
	for _, p := range rs {
		if strings.HasPrefix(p.stack, "kcp") && p.echoes > 0 {
			g.add(r.perCPU() >= 2*p.perCPU(), ">= 2x %s's echoes per CPU-second: %.2fx (server alone: %.2fx)", p.stack, r.perCPU()/p.perCPU(), r.perServerCPU()/p.perServerCPU())
		}
	}
}

func (g *goals) print() {
	if len(g.lines) == 0 {
		return
	}
	fmt.Println("\n== goals (rudp)")
	for _, l := range g.lines {
		fmt.Println(l)
	}
}

// find is rudp's result.
func find[T any](rs []T, name func(T) string) (T, bool) {
	for _, r := range rs {
		if name(r) == "rudp" {
			return r, true
		}
	}
	var zero T
	return zero, false
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
