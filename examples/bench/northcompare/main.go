// Command northcompare measures edgemux's northbound sinks against the
// same broker driven directly, on one machine in one run: messages/s from
// the bus to MQTT (mosquitto), to core NATS and to JetStream
// (nats-server), spread over 10,000 topics, beside a plain client
// publishing the same messages the same way (the ceiling: what the broker
// takes from one connection), and the drain rate of a store-and-forward
// backlog, both a burst and the backlog of an outage (60 s by default)
// while the bus publishes at a steady rate. Every row prints its share of
// its broker's ceiling measured in the same run.
//
//	go run ./examples/bench/northcompare -n 100000
//	examples/bench/northcompare/run.sh            # with `nats bench` too
//
// Beside each rate is the CPU this process spent per message (the sink,
// the bus, the store and the subscriber that counts; not the broker).
// Each figure is the time from the first publish until a subscriber on the
// broker has received every message (JetStream: until the stream holds
// them all; a drain: from the link up). It starts mosquitto and
// nats-server (with JetStream) itself, Debian's binaries, on free ports
// with temp dirs.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 100000, "messages per run")
	topics := flag.Int("topics", 10000, "topics the messages are spread over")
	size := flag.Int("size", 64, "payload bytes")
	outage := flag.Duration("outage", 60*time.Second, "how long the broker is unreachable in the outage rows (shorter for a smoke run)")
	rate := flag.Int("rate", 0, "messages/s the bus publishes during the outage (0: n per outage)")
	natsCLI := flag.String("natscli", "", "path of natscli's nats binary for a `nats bench pub` ceiling (run.sh installs one); empty: that row is left out")
	inflight := flag.Int("inflight", 256, "the sinks' inflight (their window) and the JetStream ceiling's window")
	only := flag.String("only", "", "run only the rows whose name contains this (with their broker's ceiling)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the rows run (not of the ceilings) here")
	natsN := flag.Int("nats-n", 0, "messages per core NATS row, ceiling and nats bench included (0: -n); at 100,000 those rows last under 100 ms")
	rounds := flag.Int("rounds", 1, "rounds of the comparison with `nats bench pub` (it and the two rows timed its way, in turn); the median share is printed")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		check(err)
		profile = f
		defer f.Close()
	}
	dir, err := os.MkdirTemp("", "northcompare-")
	check(err)
	defer os.RemoveAll(dir)
	mq := startServer(dir, "mosquitto")
	defer mq.Process.Kill()
	ns := startServer(dir, "nats")
	defer ns.Process.Kill()
	payload := make([]byte, *size)
	for i := range payload {
		payload[i] = 'x'
	}
	b := benchmark{only: *only, inflight: *inflight, topics: *topics, payload: payload, dir: dir, outage: *outage, rateFlag: *rate}
	b.setN(*n)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("messages=%d topics=%d size=%d outage=%v rate=%d/s  %s  loadavg %s", b.n, b.topics, len(payload), b.outage, b.rate,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), load)

	if b.wants("mqtt") {
		b.ceiling("mqtt ceiling (paho direct, QoS 1, window 64)", func() result { return b.mqttDirect(mq.url) })
	}
	if b.wants("mqtt") {
		b.mosquittoPubRows(mq.url)
	}
	b.row("edgemux bus -> mqtt (QoS 1)", func() result { return b.sink(mq.url, "mqtt", "", false) })
	b.row("edgemux bus -> mqtt (QoS 1, store)", func() result { return b.sink(mq.url, "mqtt", "", true) })
	b.row("edgemux mqtt drain of a burst backlog", func() result { return b.drain(mq.url, "mqtt") })
	b.row(fmt.Sprintf("edgemux mqtt drain after a %v outage", b.outage), func() result { return b.outageDrain(mq.url, "mqtt") })

	if *natsN > 0 && *natsN != *n && b.wants("nats") {
		b.setN(*natsN)
		fmt.Printf("core NATS rows: messages=%d rate=%d/s\n", b.n, b.rate)
	}
	if b.wants("nats") {
		b.ceiling("nats ceiling (nats.go core, flushed at the end)", func() result { return b.natsDirect(ns.url) })
	}
	if *natsCLI != "" && b.wants("nats") {
		b.natsBenchRounds(*natsCLI, ns.url, *rounds)
	}
	b.row("edgemux bus -> nats (core, QoS 1)", func() result { return b.sink(ns.url, "nats", "", false) })
	b.row("edgemux bus -> nats (core, QoS 1, store)", func() result { return b.sink(ns.url, "nats", "", true) })
	b.row("edgemux nats drain of a burst backlog", func() result { return b.drain(ns.url, "nats") })
	b.row(fmt.Sprintf("edgemux nats drain after a %v outage", b.outage), func() result { return b.outageDrain(ns.url, "nats") })

	if b.n != *n && b.wants("jetstream") {
		b.setN(*n)
		fmt.Printf("JetStream rows: messages=%d\n", b.n)
	}
	if b.wants("jetstream") {
		b.ceiling(fmt.Sprintf("jetstream ceiling (nats.go PublishAsync, window %d)", b.inflight), func() result { return b.jsDirect(ns.url) })
	}
	b.row(fmt.Sprintf("edgemux bus -> jetstream (window %d)", b.inflight), func() result { return b.sink(ns.url, "nats", jsStream, false) })
	b.row(fmt.Sprintf("edgemux bus -> jetstream (window %d, store)", b.inflight), func() result { return b.sink(ns.url, "nats", jsStream, true) })
}

// profile, when set by -cpuprofile, takes a CPU profile of the first row
// that runs (pick it with -only).
var profile *os.File

type server struct {
	*exec.Cmd
	url string
}

// startServer runs mosquitto or nats-server (JetStream on, its store in
// dir) on a free port.
func startServer(dir, kind string) server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	var s server
	if kind == "mosquitto" {
		conf := filepath.Join(dir, "mosquitto.conf")
		check(os.WriteFile(conf, []byte("user root\nlistener "+port+" 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\nmax_inflight_messages 0\nsys_interval 1\n"), 0o600))
		s = server{exec.Command("/usr/sbin/mosquitto", "-c", conf), "tcp://127.0.0.1:" + port}
	} else {
		s = server{exec.Command("/usr/sbin/nats-server", "-a", "127.0.0.1", "-p", port, "-js", "-sd", filepath.Join(dir, "jetstream")), "nats://127.0.0.1:" + port}
	}
	check(s.Start())
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			panic(kind + " did not start")
		}
	}
}

type benchmark struct {
	only      string
	inflight  int
	n, topics int
	payload   []byte
	dir       string
	outage    time.Duration
	rate      int // messages/s published during an outage
	rateFlag  int // -rate: 0 is n per outage
	runs      int
	top       float64 // the current broker's ceiling, msgs/s
}

// setN sets the messages per row, and the outage's rate with it unless
// -rate gave one.
func (b *benchmark) setN(n int) {
	b.n, b.rate = n, b.rateFlag
	if b.rate == 0 {
		b.rate = max(int(float64(n)/b.outage.Seconds()), 1)
	}
}

// result is one row's figure: count messages in d.
type result struct {
	count int
	d     time.Duration
	note  string
	cpu   time.Duration // the CPU of the timed part, where the row measures it (drains)
}

func (r result) rate() float64 { return float64(r.count) / r.d.Seconds() }

// ceiling prints a broker's ceiling: the rows after it are read against it.
func (b *benchmark) ceiling(what string, run func() result) {
	cpu := cpuTime()
	r := run()
	b.top = r.rate()
	fmt.Printf("%-62s %9.0f msgs/s   100 %%  %5.2f us  (%d in %v)\n", what, r.rate(), perMessage(cpu, r), r.count, r.d.Round(time.Millisecond))
}

// row prints a figure and its share of the ceiling.
func (b *benchmark) row(what string, run func() result) { b.rowAgainst(what, b.top, run) }

// rowAgainst prints a figure and returns its share of top (0: not run).
func (b *benchmark) rowAgainst(what string, top float64, run func() result) float64 {
	if !strings.Contains(what, b.only) {
		return 0
	}
	if profile != nil {
		check(pprof.StartCPUProfile(profile))
	}
	cpu := cpuTime()
	r := run()
	if profile != nil {
		pprof.StopCPUProfile()
		profile = nil // one row per profile: the first that runs
	}
	fmt.Printf("%-62s %9.0f msgs/s  %4.0f %%  %5.2f us  (%d in %v%s)\n", what, r.rate(), 100*r.rate()/top, perMessage(cpu, r), r.count, r.d.Round(time.Millisecond), r.note)
	return r.rate() / top
}

// wants reports whether broker's ceiling runs: unless -only names
// another broker (its rows' names have the broker's name), a ceiling with
// no row of its own is skipped.
func (b *benchmark) wants(broker string) bool {
	named := false
	for _, k := range []string{"mqtt", "nats", "jetstream"} {
		named = named || strings.Contains(b.only, k)
	}
	return !named || strings.Contains(b.only, broker)
}

// figure prints another tool's figure beside the ceiling (msgs/s; how
// says where it comes from) and returns it (0: none).
func (b *benchmark) figure(what, how string, run func() float64) float64 {
	perSecond := run()
	if perSecond <= 0 {
		fmt.Printf("%-62s (no figure: see above)\n", what)
		return 0
	}
	fmt.Printf("%-62s %9.0f msgs/s  %4.0f %%  (%s)\n", what, perSecond, 100*perSecond/b.top, how)
	return perSecond
}

func (b *benchmark) topic(i int) string { return "bench/t" + strconv.Itoa(i%b.topics) }

// cpuTime is this process's CPU time so far (user and system, every
// thread): the sink, the bus, the store, the relay and the subscriber
// counting arrivals, not the broker.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perMessage is the CPU this process spent on the row since before (or
// the row's own r.cpu), per message, in microseconds. It includes the
// row's setup (connecting, opening a store); the drain rows count from
// the link's opening.
func perMessage(before time.Duration, r result) float64 {
	cpu := cpuTime() - before
	if r.cpu > 0 {
		cpu = r.cpu
	}
	return float64(cpu) / float64(time.Microsecond) / float64(max(r.count, 1))
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
