// Command mixload is one protocol's share of the mixed-traffic benchmark
// (examples/bench/mixed.sh runs one process per protocol at once): it opens
// -conns connections of -proto to an edgemux gateway and sends requests
// open loop, -rate per second across its connections, for -duration.
//
//	mixload -addr 127.0.0.1:5020 -proto modbus -conns 1000 -rate 2000 -duration 20s
//
// Protocols and what one request is:
//
//	modbus   Modbus TCP function 3, one holding register of unit 1; the answer
//	ws-ping  WebSocket {"op":"ping"} (a heartbeat); the pong
//	ws-pub   WebSocket {"op":"pub",...} then a ping; the pong (pub has no ack)
//	private  private-protocol PUB with a message id over TCP; the ACK
//	rudp     the same over the reliable UDP core
//	coap     CoAP over UDP, confirmable PUT /t/mix/c<i>; the 2.04
//
// Open loop: connection i sends its k-th request at start + i*p/conns +
// k*p, p = conns/rate seconds, whatever the server does; latency runs from
// that scheduled time, so a request that waits for the previous one's
// answer (one is in flight per connection) counts the wait: a stalled
// server shows up as latency, not as fewer requests (no coordinated
// omission). Output: "up ..." when all connections are open, then one
// "result key=value ..." line. Everything is bounded; it always ends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits on the flags, so a typo cannot ask for something absurd.
const (
	maxConns    = 20000
	maxRate     = 1000000
	maxDuration = time.Hour
	maxParallel = 1024
)

var protos = []string{"modbus", "ws-ping", "ws-pub", "private", "rudp", "coap"}

type options struct {
	Addr     string
	Proto    string
	Conns    int
	Rate     int
	Duration time.Duration
	Timeout  time.Duration
	Parallel int
	Start    time.Duration // pause between "up" and the first request
	At       int64         // unix ms of the first request, for processes that start together; 0 = up + Start
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	raiseNoFile()
	cs, err := dialAll(o)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "up proto=%s conns=%d\n", o.Proto, len(cs))
	if o.At > 0 && time.Now().After(time.UnixMilli(o.At)) {
		fmt.Fprintln(stderr, "mixload: the connections were up only after -at; the window starts late")
	}
	r := drive(o, cs)
	for _, c := range cs {
		c.close()
	}
	r.print(stdout, o)
	return 0
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("mixload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:5020", "gateway host:port (TCP and UDP)")
	fs.StringVar(&o.Proto, "proto", "", "modbus | ws-ping | ws-pub | private | rudp | coap")
	fs.IntVar(&o.Conns, "conns", 100, "connections")
	fs.IntVar(&o.Rate, "rate", 1000, "requests per second across all connections")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to send")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "per dial and per request")
	fs.IntVar(&o.Parallel, "parallel", 64, "dials in flight")
	fs.DurationVar(&o.Start, "start", 500*time.Millisecond, "pause after all are up")
	fs.Int64Var(&o.At, "at", 0, "unix ms of the first request (several processes, one window); 0 = -start after all are up")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var bad string
	switch {
	case !slices.Contains(protos, o.Proto):
		bad = fmt.Sprintf("-proto must be one of %v", protos)
	case o.Conns < 1 || o.Conns > maxConns:
		bad = fmt.Sprintf("-conns must be 1..%d", maxConns)
	case o.Rate < 1 || o.Rate > maxRate:
		bad = fmt.Sprintf("-rate must be 1..%d", maxRate)
	case o.Duration <= 0 || o.Duration > maxDuration:
		bad = fmt.Sprintf("-duration must be in (0, %s]", maxDuration)
	case o.Timeout <= 0 || o.Timeout > time.Minute:
		bad = "-timeout must be in (0, 1m]"
	case o.Parallel < 1 || o.Parallel > maxParallel:
		bad = fmt.Sprintf("-parallel must be 1..%d", maxParallel)
	}
	if bad != "" {
		fmt.Fprintln(stderr, "mixload:", bad)
		return o, errors.New(bad)
	}
	return o, nil
}

// dialAll opens every connection, -parallel at a time.
func dialAll(o options) ([]client, error) {
	cs := make([]client, o.Conns)
	errs := make([]error, o.Conns)
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	for i := range cs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
			defer cancel()
			cs[i], errs[i] = dialClient(ctx, o, i)
		})
	}
	wg.Wait()
	var open []client
	var first error
	for i, c := range cs {
		if errs[i] != nil && first == nil {
			first = fmt.Errorf("mixload: %s connection %d: %w", o.Proto, i, errs[i])
		}
		if c != nil {
			open = append(open, c)
		}
	}
	if first != nil {
		for _, c := range open {
			c.close()
		}
		return nil, first
	}
	return cs, nil
}

// result is what one run measured.
type result struct {
	lat     hist
	sent    atomic.Uint64
	ok      atomic.Uint64
	errs    atomic.Uint64
	late    atomic.Uint64 // sent after their scheduled time (the previous answer was late)
	elapsed time.Duration
	cpu     time.Duration // this process's user+system time
	lastErr atomic.Value
}

// drive runs the schedule: one goroutine per connection, mostly asleep.
func drive(o options, cs []client) *result {
	r := &result{}
	period := time.Duration(float64(time.Second) * float64(len(cs)) / float64(o.Rate))
	start := time.Now().Add(o.Start)
	if o.At > 0 {
		start = time.UnixMilli(o.At)
	}
	end := start.Add(o.Duration)
	cpu0 := cpuTime()
	var wg sync.WaitGroup
	for i, c := range cs {
		phase := period * time.Duration(i) / time.Duration(len(cs))
		wg.Go(func() { r.conn(c, start.Add(phase), end, period) })
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.cpu = cpuTime() - cpu0
	return r
}

// conn sends on one connection's schedule until end; a broken connection
// counts its remaining requests as errors.
func (r *result) conn(c client, at, end time.Time, period time.Duration) {
	broken := false
	for seq := uint32(1); at.Before(end); seq++ {
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		} else if -d > time.Millisecond {
			r.late.Add(1)
		}
		r.sent.Add(1)
		if broken {
			r.errs.Add(1)
			at = at.Add(period)
			continue
		}
		if err := c.do(seq); err != nil {
			r.errs.Add(1)
			r.lastErr.Store(err.Error())
			broken = !errors.Is(err, errAnswer)
		} else {
			r.ok.Add(1)
		}
		r.lat.record(time.Since(at))
		at = at.Add(period)
	}
}

func (r *result) print(w io.Writer, o options) {
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/1e3) }
	last, _ := r.lastErr.Load().(string)
	fmt.Fprintf(w, "result proto=%s conns=%d rate=%d sent=%d ok=%d errors=%d late=%d qps=%.0f p50_us=%s p99_us=%s p999_us=%s max_us=%s client_cpu_s=%.2f last_error=%q\n",
		o.Proto, o.Conns, o.Rate, r.sent.Load(), r.ok.Load(), r.errs.Load(), r.late.Load(),
		float64(r.ok.Load())/r.elapsed.Seconds(),
		us(r.lat.quantile(0.50)), us(r.lat.quantile(0.99)), us(r.lat.quantile(0.999)),
		us(time.Duration(r.lat.max.Load())), r.cpu.Seconds(), last)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// raiseNoFile lifts the soft open-file limit to the hard one: 19k
// connections need more than the usual 1024.
func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
