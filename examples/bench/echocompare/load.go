package main

// The load generator: dials the connections from several loopback source
// addresses, measures the server's idle memory per connection, then drives
// the active ones closed loop (send, wait for the echo, send again) or open
// loop (each request at its scheduled time; latency counts from then, so a
// server that falls behind shows it), and reads the server's CPU time from
// /proc/PID/stat around the measured window.
//
// Every server gets the same bytes: a private-protocol HELLO per
// connection, a SUB of its own topic per active connection, then requests.
// A 20-byte request is a PING with an 8-byte token (edgemux answers PONG, a
// frame of the same length); any other size is a PUB with message id 0 to
// the connection's own topic, which edgemux routes through its bus back to
// that connection as the same frame. The peers echo every frame as it is.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
)

type loadConfig struct {
	addr, server, pin, mode, out string
	pid                          int
	conns, active, size, sources int
	rate                         float64 // open loop: requests/s over all active connections
	syscalls                     bool    // count the server's system calls in the window (perf stat)
	warmup, duration, settle     time.Duration
	prime                        int // connections run through the whole path and closed before the idle baseline
}

// result is one row of results.jsonl.
type result struct {
	Server     string  `json:"server"`
	Pin        string  `json:"pin"`
	Mode       string  `json:"mode"`
	Conns      int     `json:"conns"`
	Active     int     `json:"active"`
	Size       int     `json:"size"`
	Requests   int64   `json:"requests"`
	RPS        float64 `json:"rps"`
	CPUus      float64 `json:"cpu_us_per_req"`
	UserUs     float64 `json:"user_us_per_req,omitempty"`     // the user-space part of CPUus (0: not read)
	Syscalls   float64 `json:"syscalls_per_req,omitempty"`    // 0: not counted
	EpollWaits float64 `json:"epoll_waits_per_req,omitempty"` // of Syscalls; 0: not counted (or none)
	Switches   float64 `json:"switches_per_req,omitempty"`    // context switches, every thread
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	IdleBytes  float64 `json:"idle_bytes_per_conn"`
	IdleFile   float64 `json:"idle_file_bytes_per_conn,omitempty"` // of IdleBytes, file-backed (RssFile): the binary's code paged in
	Errors     int64   `json:"errors"`
	LoadAvg    string  `json:"loadavg"`
	Note       string  `json:"note,omitempty"`
	ServerRSS  int64   `json:"server_rss_bytes"`
	DialFailed int64   `json:"dial_failed"`
}

func loadMain(args []string) error {
	var c loadConfig
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:5080", "server address")
	fs.StringVar(&c.server, "server", "", "server name for the report")
	fs.StringVar(&c.pin, "pin", "default", "label: how the server was placed (pinned | default)")
	fs.StringVar(&c.mode, "mode", "closed", "closed | open | connect (each of -active clients: dial, HELLO, answer, close, again)")
	fs.StringVar(&c.out, "out", "", "append the result as a JSON line here (default stdout)")
	fs.IntVar(&c.pid, "pid", 0, "server PID (for CPU and RSS)")
	fs.IntVar(&c.conns, "conns", 1000, "connections")
	fs.IntVar(&c.active, "active", 1000, "connections that send requests (<= conns)")
	fs.IntVar(&c.size, "size", 64, "request frame bytes: 20 (PING) or >= 64 (PUB echo)")
	fs.IntVar(&c.sources, "sources", 8, "loopback source addresses (127.0.0.2 on)")
	fs.Float64Var(&c.rate, "rate", 20000, "open loop: requests/s in all")
	fs.BoolVar(&c.syscalls, "syscalls", false, "count the server's system calls in the window with perf stat (needs perf and the right to trace the server)")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "load before the measured window")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "measured window")
	fs.IntVar(&c.prime, "prime", 64, "connections that dial, say HELLO, subscribe, echo once and close before the idle baseline is read (0: none)")
	fs.DurationVar(&c.settle, "settle", 2*time.Second, "wait before dialing (the server settles after its start) and after it, before the idle memory is read")
	fs.Parse(args)
	if c.active > c.conns || c.active < 1 || c.conns > 19500 {
		return errors.New("want 1 <= active <= conns <= 19500")
	}
	if c.mode != "connect" && c.size != 20 && c.size < 64 {
		return errors.New("size is 20 (PING) or at least 64")
	}
	r, err := runLoad(c)
	if err != nil {
		return err
	}
	return writeResult(c.out, r)
}

func writeResult(path string, r result) error {
	b, _ := json.Marshal(r)
	b = append(b, '\n')
	if path == "" {
		_, err := os.Stdout.Write(b)
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(b)
	return err
}

// client is one connection with its request frame.
type client struct {
	idx int
	c   net.Conn
	rd  *bufio.Reader
	req []byte
	buf []byte
	lat []time.Duration // this connection's latencies in the window
}

func runLoad(c loadConfig) (result, error) {
	if c.mode == "connect" {
		return runConnect(c)
	}
	r := result{Server: c.server, Pin: c.pin, Mode: c.mode, Conns: c.conns, Active: c.active, Size: c.size}
	// The server may still be starting: edgemux's RSS grew 1.3-1.5 MB
	// about a second after its port opened, with no client (its first
	// stats snapshot scanned the whole fd-indexed registry; it stops at
	// the highest fd in use now). Read at once, such growth lands in the
	// idle figure: 1.2-1.5 KB per connection at 1,000 connections, 70 at
	// 19,000. Every server gets the same wait.
	if err := prime(c); err != nil {
		return r, fmt.Errorf("priming: %w", err)
	}
	time.Sleep(c.settle)
	rss0, file0 := procRSS(c.pid), procStatusBytes(c.pid, "RssFile")
	clients, failed := dialAll(c)
	defer func() {
		for _, cl := range clients {
			cl.c.Close()
		}
	}()
	r.DialFailed = failed
	if len(clients) < c.active {
		return r, fmt.Errorf("%d of %d connections dialed", len(clients), c.conns)
	}
	time.Sleep(c.settle)
	if rss1 := procRSS(c.pid); rss0 > 0 && rss1 > 0 {
		r.IdleBytes = float64(rss1-rss0) / float64(len(clients))
	}
	// The file-backed part of that growth is no memory the connections
	// hold: it is code of the accept and HELLO paths that the first
	// connections paged in (the kernel maps up to 64 KiB around each
	// fault), once. It weighs in at 1,000 connections, not at 19,000.
	if file1 := procStatusBytes(c.pid, "RssFile"); file0 > 0 && file1 > 0 {
		r.IdleFile = float64(file1-file0) / float64(len(clients))
	}
	active := clients[:c.active]
	for i, cl := range active {
		if err := subscribe(cl, i, c.size); err != nil {
			return r, fmt.Errorf("setting up connection %d: %w", i, err)
		}
	}
	var measuring atomic.Bool
	var reqs, errs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for _, cl := range active {
		wg.Add(1)
		go func() {
			defer wg.Done()
			drive(c, cl, start, &measuring, &reqs, &errs, stop)
		}()
	}
	time.Sleep(c.warmup)
	win := openWindow(c.pid, c.syscalls)
	measuring.Store(true)
	time.Sleep(c.duration)
	measuring.Store(false)
	n := reqs.Load()
	win.close(&r, n)
	close(stop)
	for _, cl := range active {
		cl.c.SetDeadline(time.Now()) // unblocks the readers
	}
	wg.Wait()
	r.Errors = errs.Load()
	var all []time.Duration
	for _, cl := range active {
		all = append(all, cl.lat...)
	}
	slices.Sort(all)
	r.P50us, r.P99us, r.P999us = quantile(all, 0.50), quantile(all, 0.99), quantile(all, 0.999)
	r.ServerRSS = procRSS(c.pid)
	r.LoadAvg = loadAvg()
	return r, nil
}

// prime runs c.prime connections, one after another, through everything
// a measured connection will do (dial, HELLO, subscribe, one echo) and
// closes them, so that the server has run its code before the idle
// baseline is read. Without it, the binary's code that the first
// connections page in (edgemux: 118-127 B of its 438-451 B per idle
// connection at 1,000 connections, none at 19,000) counts as memory the
// connections hold. Every server is primed the same way. Their indices
// follow the measured ones, so no device id or topic is shared.
func prime(c loadConfig) error {
	for k := range c.prime {
		i := c.conns + k
		cl, err := dialOne(c, i)
		if err != nil {
			return err
		}
		err = subscribe(cl, i, c.size)
		if err == nil {
			cl.c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err = cl.c.Write(cl.req); err == nil {
				err = readAnswer(cl)
			}
		}
		cl.c.Close()
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
	}
	return nil
}

// drive runs one active connection until stop.
func drive(c loadConfig, cl *client, start time.Time, measuring *atomic.Bool, reqs, errs *atomic.Int64, stop chan struct{}) {
	var interval time.Duration
	if c.mode == "open" {
		interval = time.Duration(float64(time.Second) * float64(c.active) / c.rate)
	}
	// Spread the open-loop schedules over one interval.
	next := start.Add(time.Duration(int64(interval) * int64(cl.idx%64) / 64))
	for {
		select {
		case <-stop:
			return
		default:
		}
		sent := time.Now()
		if interval > 0 {
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			sent = next // latency from the scheduled time
			next = next.Add(interval)
		}
		if _, err := cl.c.Write(cl.req); err != nil {
			select {
			case <-stop:
			default:
				errs.Add(1)
			}
			return
		}
		if err := readAnswer(cl); err != nil {
			select {
			case <-stop:
			default:
				errs.Add(1)
				fmt.Fprintf(os.Stderr, "connection %d: %v\n", cl.idx, err)
			}
			return
		}
		if measuring.Load() {
			reqs.Add(1)
			cl.lat = append(cl.lat, time.Since(sent))
		}
	}
}

// dialAll opens the connections, 64 at a time, each from one of the
// source addresses in turn, and says HELLO on each.
func dialAll(c loadConfig) ([]*client, int64) {
	clients := make([]*client, c.conns)
	var failed atomic.Int64
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range c.conns {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			cl, err := dialOne(c, i)
			if err != nil {
				failed.Add(1)
				return
			}
			clients[i] = cl
		}()
	}
	wg.Wait()
	out := clients[:0]
	for _, cl := range clients {
		if cl != nil {
			out = append(out, cl)
		}
	}
	return out, failed.Load()
}

func dialOne(c loadConfig, i int) (*client, error) {
	src := net.IPv4(127, 0, 0, byte(2+i%c.sources))
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 10 * time.Second}
	nc, err := d.Dial("tcp", c.addr)
	if err != nil {
		return nil, err
	}
	cl := &client{idx: i, c: nc, rd: bufio.NewReaderSize(nc, 2048)}
	hello, _ := private.AppendHello(nil, private.Hello{DeviceID: []byte("echo-" + strconv.Itoa(i))})
	if err := exchange(cl, hello); err != nil {
		nc.Close()
		return nil, err
	}
	return cl, nil
}

// subscribe gives an active connection its request and, for a PUB echo,
// subscribes it to its own topic.
func subscribe(cl *client, i, size int) error {
	topic := "echo/" + strconv.Itoa(size) + "/" + strconv.Itoa(i) // a fresh topic per size: no retained value replays
	if size == 20 {
		var tok [8]byte
		binary.BigEndian.PutUint64(tok[:], uint64(i))
		cl.req = private.AppendFrame(nil, private.TypePing, tok[:])
	} else {
		// The request names the source a delivery carries ("private"), so
		// the delivery edgemux sends back is as long as the request.
		src := []byte(private.Source)
		empty, _ := private.AppendPub(nil, private.Pub{Topic: []byte(topic), Src: src})
		pad := size - len(empty)
		if pad < 0 {
			return fmt.Errorf("size %d is below a PUB to %s (%d bytes)", size, topic, len(empty))
		}
		cl.req, _ = private.AppendPub(nil, private.Pub{Topic: []byte(topic), Src: src, Data: []byte(strings.Repeat("e", pad))})
		sub, _ := private.AppendSub(nil, private.Sub{MsgID: 1, Filter: []byte(topic)})
		if err := exchange(cl, sub); err != nil {
			return err
		}
	}
	if len(cl.req) != size {
		return fmt.Errorf("request frame is %d bytes, want %d", len(cl.req), size)
	}
	cl.buf = make([]byte, size)
	return nil
}

// exchange writes a frame and reads one whole frame back (edgemux's ACK,
// or the peer's echo), with a hang guard.
func exchange(cl *client, frame []byte) error {
	cl.c.SetDeadline(time.Now().Add(30 * time.Second))
	defer cl.c.SetDeadline(time.Time{})
	if _, err := cl.c.Write(frame); err != nil {
		return err
	}
	var hdr [private.HeaderLen]byte
	if _, err := io.ReadFull(cl.rd, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[4:8])
	if n > 1<<16 {
		return fmt.Errorf("answer announces %d bytes", n)
	}
	_, err := io.CopyN(io.Discard, cl.rd, int64(n))
	return err
}

// readAnswer reads one answer and checks that it is the echo: a frame of
// the request's length and type (edgemux answers a PING with a PONG).
func readAnswer(cl *client) error {
	if _, err := io.ReadFull(cl.rd, cl.buf); err != nil {
		return err
	}
	typ, n := private.Type(cl.buf[3]), binary.BigEndian.Uint32(cl.buf[4:8])
	want := private.Type(cl.req[3])
	if int(n) != len(cl.req)-private.HeaderLen || typ != want && !(want == private.TypePing && typ == private.TypePong) {
		return fmt.Errorf("answer is %v of %d payload bytes, want %v of %d", typ, n, want, len(cl.req)-private.HeaderLen)
	}
	return nil
}

func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[i].Nanoseconds()) / 1e3
}

// procCPU is the process's user+system CPU time in seconds and the user
// part of it, both -1 if unknown. The kernel counts them in clock ticks of
// 1/100 s on Linux (USER_HZ).
func procCPU(pid int) (total, user float64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1, -1
	}
	// Fields after the command name, which is in parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return -1, -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, ut / 100
}

// procRSS is the process's resident set in bytes, 0 if unknown.
func procRSS(pid int) int64 { return procStatusBytes(pid, "VmRSS") }

// procStatusBytes is a size field of /proc/PID/status (VmRSS, RssFile) in
// bytes, 0 if unknown.
func procStatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// runConnect measures new connections: each of c.active clients in turn
// dials (from the source addresses in turn), says HELLO, reads the answer
// (edgemux's ACK, a peer's echo) and closes, over and over. A request here
// is one such cycle; CPU per request is the server's per new connection.
func runConnect(c loadConfig) (result, error) {
	r := result{Server: c.server, Pin: c.pin, Mode: c.mode, Conns: c.active, Active: c.active, Size: 18}
	var measuring atomic.Bool
	var cycles, errs atomic.Int64
	var stopped atomic.Bool
	var wg sync.WaitGroup
	lats := make([][]time.Duration, c.active)
	for g := range c.active {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; !stopped.Load(); i += c.active {
				t := time.Now()
				cl, err := dialOne(c, i)
				if err != nil {
					if !stopped.Load() {
						errs.Add(1)
					}
					continue
				}
				cl.c.Close()
				if measuring.Load() {
					cycles.Add(1)
					lats[g] = append(lats[g], time.Since(t))
				}
			}
		}()
	}
	time.Sleep(c.warmup)
	win := openWindow(c.pid, c.syscalls)
	measuring.Store(true)
	time.Sleep(c.duration)
	measuring.Store(false)
	win.close(&r, cycles.Load())
	stopped.Store(true)
	wg.Wait()
	r.Errors = errs.Load()
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	r.P50us, r.P99us, r.P999us = quantile(all, 0.50), quantile(all, 0.99), quantile(all, 0.999)
	r.ServerRSS = procRSS(c.pid)
	r.LoadAvg = loadAvg()
	return r, nil
}
