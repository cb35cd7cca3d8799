// Command lossy is a UDP relay that impairs what it carries: loss
// (Bernoulli or Gilbert-Elliott bursts), delay and jitter, reordering,
// duplication, corruption, blackouts and NAT-like port rebinding, each way,
// seeded, with byte counts. The kernel here has no netem, so tests and
// benchmarks of UDP protocols put this relay between client and server.
//
//	lossy -listen 127.0.0.1:6000 -upstream 127.0.0.1:5020 -loss 0.1 -delay 10ms
//
// Clients send to -listen; each gets its own source port toward
// -upstream. Loopback addresses only.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lossy:", err)
		os.Exit(2)
	}
}

// options are the command line.
type options struct {
	listen, upstream string
	cfg              lossy.Config
	blackout         string // "START+LENGTH", e.g. 30s+10s
	rebind           time.Duration
	stats            time.Duration
	duration         time.Duration
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("lossy", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:6000", "address clients send to")
	fs.StringVar(&o.upstream, "upstream", "127.0.0.1:5020", "the server")
	fs.Uint64Var(&o.cfg.Seed, "seed", 1, "random seed")
	imp := &o.cfg.Up
	fs.Float64Var(&imp.Loss, "loss", 0, "loss probability, each way")
	fs.DurationVar(&imp.Delay, "delay", 0, "one-way delay")
	fs.DurationVar(&imp.Jitter, "jitter", 0, "uniform extra delay up to this")
	fs.Float64Var(&imp.Reorder, "reorder", 0, "probability of holding a datagram back -reorder-delay")
	fs.DurationVar(&imp.ReorderDelay, "reorder-delay", 20*time.Millisecond, "how long a reordered datagram is held back")
	fs.Float64Var(&imp.Duplicate, "dup", 0, "duplication probability")
	fs.Float64Var(&imp.Corrupt, "corrupt", 0, "probability of one flipped bit")
	fs.IntVar(&imp.Rate, "rate", 0, "link rate in bytes/s each way (0: unlimited)")
	burst := fs.String("burst", "", "Gilbert-Elliott loss instead of -loss: goodToBad,badToGood,lossGood,lossBad")
	fs.StringVar(&o.blackout, "blackout", "", "drop everything from START for LENGTH after the start, e.g. 30s+10s")
	fs.DurationVar(&o.rebind, "rebind", 0, "give each client a new upstream port this often (0: never)")
	fs.DurationVar(&o.stats, "stats", 5*time.Second, "print the counts this often")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: on SIGINT)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *burst != "" {
		var g lossy.GilbertElliott
		if _, err := fmt.Sscanf(strings.ReplaceAll(*burst, ",", " "), "%g %g %g %g", &g.GoodToBad, &g.BadToGood, &g.LossGood, &g.LossBad); err != nil {
			return o, fmt.Errorf("-burst %q: %w", *burst, err)
		}
		imp.Burst = &g
	}
	for name, p := range map[string]float64{"loss": imp.Loss, "reorder": imp.Reorder, "dup": imp.Duplicate, "corrupt": imp.Corrupt} {
		if p < 0 || p > 1 {
			return o, fmt.Errorf("-%s %g: not a probability", name, p)
		}
	}
	o.cfg.Down = *imp
	return o, nil
}

// loopbackOnly refuses addresses off this machine.
func loopbackOnly(s string) (netip.AddrPort, error) {
	a, err := netip.ParseAddrPort(s)
	if err != nil {
		return a, err
	}
	if !a.Addr().IsLoopback() {
		return a, fmt.Errorf("%s: loopback addresses only", s)
	}
	return a, nil
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	listenAddr, err := loopbackOnly(o.listen)
	if err != nil {
		return err
	}
	upstream, err := loopbackOnly(o.upstream)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(listenAddr))
	if err != nil {
		return err
	}
	defer conn.Close()
	r := lossy.NewRelay(conn, upstream, o.cfg, o.rebind)
	if err := blackout(r, o.blackout, time.Now()); err != nil {
		return err
	}
	fmt.Printf("lossy: %s -> %s\n", conn.LocalAddr(), upstream)
	if o.stats > 0 {
		go func() {
			tick := time.NewTicker(o.stats)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					fmt.Println("lossy:", r.Report())
				}
			}
		}()
	}
	err = r.Run(ctx)
	conn.Close()
	fmt.Println("lossy:", r.Report())
	return err
}

// blackout schedules "START+LENGTH" (durations from now) on n.
func blackout(r *lossy.Relay, spec string, now time.Time) error {
	if spec == "" {
		return nil
	}
	parts := strings.SplitN(spec, "+", 2)
	if len(parts) != 2 {
		return fmt.Errorf("-blackout %q: want START+LENGTH", spec)
	}
	start, err := time.ParseDuration(parts[0])
	var length time.Duration
	if err == nil {
		length, err = time.ParseDuration(parts[1])
	}
	if err != nil {
		return fmt.Errorf("-blackout %q: %w", spec, err)
	}
	r.Blackout(now.Add(start), now.Add(start+length))
	return nil
}
