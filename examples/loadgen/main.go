// Command loadgen drives an edgemux gateway with private-protocol devices
// over loopback TCP, for the scripts in examples/bench.
//
//	loadgen -mode idle -conns 19000 -sources 64 -hold 60s
//	loadgen -mode pub  -conns 1000 -subs 4 -duration 10s -size 32 [-rate 50000]
//
// idle opens conns connections spread over source addresses 127.0.0.2..,
// each says HELLO and waits for the gateway's ACK, then stays silent; it
// prints "up ..." once all are open, holds them for -hold or until SIGTERM
// or SIGINT, then prints how many the gateway closed meanwhile.
//
// pub opens -subs subscribers (subscriber i takes "lg/<i>/#") and conns
// publishers (publisher j publishes to "lg/<j mod subs>/d<j>", so every
// message matches exactly one subscription), then publishes PUB frames
// with msg id 0 (no ACK) for -duration, as fast as possible or at -rate
// publishes per second in all, and prints publishes/s sent and
// deliveries/s received. A few writer goroutines (-writers) serve all
// publishers round robin with non-blocking writes, -burst writes to one
// publisher before the next and -batch frames per write; each subscriber has one reader goroutine that counts frames.
//
// Output is one "key=value ..." line per event so that scripts can parse
// it; the last line starts with "result". Everything is bounded: dials,
// handshakes and holds have limits, and the program always ends by
// itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Limits on the flags, so a typo cannot ask for something absurd.
const (
	maxConns    = 1 << 20
	maxSources  = 250 // 127.0.0.2 .. 127.0.0.251
	maxParallel = 4096
	maxSubs     = 256
	maxSize     = 60000 // below the private protocol's default max_frame
	maxWriters  = 256
	maxBatch    = 64
	maxHold     = 24 * time.Hour
	maxDuration = time.Hour
)

var errUsage = errors.New("loadgen: bad flags")

// options are the parsed flags.
type options struct {
	Addr     string
	Mode     string
	Conns    int
	Sources  int
	Parallel int           // dials and handshakes in flight at once
	Timeout  time.Duration // per dial + handshake
	Hold     time.Duration // idle: how long to hold the connections
	Subs     int           // pub: subscribers
	Rate     int           // pub: publishes per second in all; 0 = as fast as possible
	Duration time.Duration // pub: how long to publish
	Size     int           // pub: payload bytes
	Drain    time.Duration // pub: how long to wait for late deliveries
	Delay    time.Duration // pub: pause between "up" and publishing
	Writers  int           // pub: goroutines that write for the publishers
	Burst    int           // pub: writes to one connection before the next
	Batch    int           // pub: frames per write
	Prefix   string        // device id prefix
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	opt, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if soft, hard, err := raiseFileLimit(); err != nil {
		fmt.Fprintln(stderr, "loadgen: raising RLIMIT_NOFILE:", err)
	} else if soft < uint64(opt.Conns+opt.Subs+64) {
		fmt.Fprintf(stderr, "loadgen: warning: RLIMIT_NOFILE %d (hard %d) is below conns+subs\n", soft, hard)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch opt.Mode {
	case "idle":
		err = runIdle(ctx, opt, stdout)
	case "pub":
		err = runPub(ctx, opt, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:5020", "gateway address (host:port)")
	fs.StringVar(&o.Mode, "mode", "idle", "idle | pub")
	fs.IntVar(&o.Conns, "conns", 100, "connections (idle) or publishers (pub)")
	fs.IntVar(&o.Sources, "sources", 16, "source addresses 127.0.0.2.. to spread connections over (1..250)")
	fs.IntVar(&o.Parallel, "parallel", 128, "dials and handshakes in flight at once")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "limit for one dial and its HELLO/ACK")
	fs.DurationVar(&o.Hold, "hold", 60*time.Second, "idle: hold the connections this long (SIGTERM ends it early)")
	fs.IntVar(&o.Subs, "subs", 1, "pub: subscriber connections")
	fs.IntVar(&o.Rate, "rate", 0, "pub: publishes per second in all; 0 = as fast as possible")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "pub: how long to publish")
	fs.IntVar(&o.Size, "size", 16, "pub: payload bytes per publish")
	fs.DurationVar(&o.Drain, "drain", time.Second, "pub: wait this long after publishing for late deliveries")
	fs.DurationVar(&o.Delay, "delay", 0, "pub: pause after \"up\" before publishing (lets a script sample the gateway)")
	fs.IntVar(&o.Writers, "writers", 2, "pub: goroutines writing for all publishers (round robin, non-blocking)")
	fs.IntVar(&o.Burst, "burst", 32, "pub: writes to one publisher back to back before the writer moves on")
	fs.IntVar(&o.Batch, "batch", 1, "pub: PUB frames per write on one connection")
	fs.StringVar(&o.Prefix, "prefix", "lg", "device id prefix")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, o.check()
}

// check rejects out-of-range flags with one error naming each.
func (o options) check() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...))
	}
	if o.Mode != "idle" && o.Mode != "pub" {
		bad("-mode %q: want idle or pub", o.Mode)
	}
	if o.Conns < 1 || o.Conns > maxConns {
		bad("-conns %d: want 1..%d", o.Conns, maxConns)
	}
	if o.Sources < 1 || o.Sources > maxSources {
		bad("-sources %d: want 1..%d", o.Sources, maxSources)
	}
	if o.Parallel < 1 || o.Parallel > maxParallel {
		bad("-parallel %d: want 1..%d", o.Parallel, maxParallel)
	}
	if o.Timeout <= 0 || o.Hold < 0 || o.Hold > maxHold {
		bad("-timeout must be > 0 and -hold in 0..%v", maxHold)
	}
	if o.Subs < 1 || o.Subs > maxSubs {
		bad("-subs %d: want 1..%d", o.Subs, maxSubs)
	}
	if o.Rate < 0 || o.Size < 0 || o.Size > maxSize {
		bad("-rate must be >= 0 and -size in 0..%d", maxSize)
	}
	if o.Duration <= 0 || o.Duration > maxDuration || o.Drain < 0 || o.Drain > time.Minute ||
		o.Delay < 0 || o.Delay > time.Minute {
		bad("-duration in (0, %v], -drain and -delay in 0..1m", maxDuration)
	}
	if o.Writers < 1 || o.Writers > maxWriters || o.Batch < 1 || o.Batch > maxBatch ||
		o.Burst < 1 || o.Burst > maxBatch {
		bad("-writers in 1..%d, -burst and -batch in 1..%d", maxWriters, maxBatch)
	}
	if o.Prefix == "" || len(o.Prefix) > 64 {
		bad("-prefix: 1..64 bytes")
	}
	return errors.Join(errs...)
}

// cpuSeconds is the user+system CPU this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard limit: one fd
// per connection, and the defaults are often 1024.
func raiseFileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return lim.Cur, lim.Max, err
		}
	}
	return lim.Cur, lim.Max, nil
}
