package main

// Row 2: idle sessions. The server runs in a child process; the clients
// (this process) open n sessions over a few shared sockets, send one
// message each, and then stay idle (their stack's keepalives only). The
// server's memory per session is the growth from before the first
// session to after the last message and a few quiet seconds (Go heap in
// use plus goroutine stacks, and RSS); its idle CPU is its CPU time over
// an idle window, as a share of one core, next to the same before any
// session opened (what the server's own timers cost).

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

type idleConfig struct {
	sessions int
	sockets  int
	settle   time.Duration // quiet before measuring memory
	idle     time.Duration // the CPU window
	setup    time.Duration // at most, to open the sessions and deliver their messages
}

type idleResult struct {
	stack            string
	asked, held      int // sessions asked for; open at the end of the idle window, by the server's count
	delivered        int64
	setupTime        time.Duration
	base, mem, after childStats
	cpuIdle          float64 // share of a core
	cpuEmpty         float64 // the same before any session: the server's own timers
	dgramRate        float64 // datagrams a second in and out of the server in the idle window (the clients' count); 0: not counted
	dgramIn          float64 // of which to the server
}

// nsPerDatagram is the idle CPU above the empty server's over the
// datagrams it handled: what each keepalive (or its answer) costs the
// server, socket calls and wakeups included.
func (r idleResult) nsPerDatagram() float64 {
	if r.dgramRate == 0 {
		return math.NaN()
	}
	return (r.cpuIdle - r.cpuEmpty) * 1e9 / r.dgramRate
}

// datagramCounter is a stack whose clients count the datagrams they
// write and read.
type datagramCounter interface {
	datagrams() (sent, got int64)
}

// datagramsOf is the clients' datagrams written and read so far; 0 for a
// stack that does not count them.
func datagramsOf(cs clients) (sent, got int64) {
	if dc, ok := cs.(datagramCounter); ok {
		return dc.datagrams()
	}
	return 0, 0
}

func (r idleResult) heapPerSession() float64 {
	return float64(int64(r.mem.Heap+r.mem.Stacks)-int64(r.base.Heap+r.base.Stacks)) / float64(max(r.held, 1))
}
func (r idleResult) rssPerSession() float64 {
	return float64(int64(r.mem.RSS)-int64(r.base.RSS)) / float64(max(r.held, 1))
}

func runIdle(st stack, cfg idleConfig) (idleResult, error) {
	res := idleResult{stack: st.name, asked: cfg.sessions}
	ch, err := startChild(st.name, false)
	if err != nil {
		return res, err
	}
	defer ch.stop()
	if res.base, err = ch.ask("mem"); err != nil {
		return res, err
	}
	empty := cfg.idle / 3
	time.Sleep(empty)
	s, err := ch.ask("stats")
	if err != nil {
		return res, err
	}
	res.cpuEmpty = float64(s.CPU-res.base.CPU) / float64(empty)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.setup)
	defer cancel()
	cs, err := st.dial(ctx, dialConfig{server: ch.addr, n: cfg.sessions, sockets: cfg.sockets})
	if err != nil {
		return res, fmt.Errorf("%s: dial: %w", st.name, err)
	}
	defer cs.close()
	// A session whose dial failed (quic-go's handshake timeout, on a
	// loaded machine) sends nothing: wait for the messages of those up.
	up := cs.established()
	sendOneEach(cs, cfg.sessions)
	for ctx.Err() == nil {
		s, err := ch.ask("stats")
		if err != nil {
			return res, err
		}
		if res.delivered = s.Msgs; s.Msgs >= int64(up) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.setupTime = time.Since(start)
	time.Sleep(cfg.settle)
	if res.mem, err = ch.ask("mem"); err != nil {
		return res, err
	}
	if _, err := ch.ask("heapprofile"); err != nil {
		return res, err
	}
	before, err := ch.ask("stats")
	if err != nil {
		return res, err
	}
	sent0, got0 := datagramsOf(cs)
	time.Sleep(cfg.idle)
	if res.after, err = ch.ask("stats"); err != nil {
		return res, err
	}
	sent, got := datagramsOf(cs)
	res.dgramIn = float64(sent-sent0) / cfg.idle.Seconds()
	res.dgramRate = res.dgramIn + float64(got-got0)/cfg.idle.Seconds()
	res.held = int(res.after.Sessions)
	res.cpuIdle = float64(res.after.CPU-before.CPU) / float64(cfg.idle)
	return res, nil
}

// sendOneEach sends every session its one message, from a few goroutines
// (each session from one only).
func sendOneEach(cs clients, n int) {
	const senders = 8
	var wg sync.WaitGroup
	for k := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, msgSize)
			for i := k; i < n; i += senders {
				cs.send(i, fillMessage(buf, uint32(i), 0, sinceEpoch()))
			}
		}()
	}
	wg.Wait()
}
