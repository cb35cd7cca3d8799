package main

// Row 3: 64-byte echo messages per CPU-second. The server runs in a child
// process, the clients here, connected directly (no relay, no loss). Each
// session keeps a window of messages in flight and sends the next as each
// echo returns. CPU is both processes' user + system time over the run
// (getrusage before and after), and the server's alone.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

type echoConfig struct {
	sessions int
	window   int // messages in flight per session
	duration time.Duration
}

type echoResult struct {
	stack                string
	echoes, bad          int64
	serverCPU, clientCPU time.Duration
	wall                 time.Duration
}

func (r echoResult) perCPU() float64 {
	return float64(r.echoes) / (r.serverCPU + r.clientCPU).Seconds()
}
func (r echoResult) perServerCPU() float64 { return float64(r.echoes) / r.serverCPU.Seconds() }

func runEcho(st stack, cfg echoConfig) (echoResult, error) {
	res := echoResult{stack: st.name}
	ch, err := startChild(st.name, true)
	if err != nil {
		return res, err
	}
	defer ch.stop()
	var echoes, bad atomic.Int64
	var running atomic.Bool
	locks := make([]sync.Mutex, cfg.sessions)
	seqs := make([]uint64, cfg.sessions)
	bufs := make([][]byte, cfg.sessions)
	var cs clients
	sendNext := func(i int) {
		locks[i].Lock()
		cs.send(i, fillMessage(bufs[i], uint32(i), seqs[i], sinceEpoch()))
		seqs[i]++
		locks[i].Unlock()
	}
	onReply := func(i int, msg []byte) {
		if m := parseMessage(msg); !m.ok || int(m.session) != i {
			bad.Add(1)
		}
		if running.Load() {
			echoes.Add(1)
			sendNext(i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range bufs {
		bufs[i] = make([]byte, msgSize)
	}
	if cs, err = st.dial(ctx, dialConfig{server: ch.addr, n: cfg.sessions, onReply: onReply}); err != nil {
		return res, fmt.Errorf("%s: dial: %w", st.name, err)
	}
	defer cs.close()
	if up := cs.established(); up < cfg.sessions {
		return res, fmt.Errorf("%s: %d of %d sessions established", st.name, up, cfg.sessions)
	}
	before, err := ch.ask("stats")
	if err != nil {
		return res, err
	}
	clientBefore, start := cpuTime(), time.Now()
	running.Store(true)
	for i := range cfg.sessions {
		for range cfg.window {
			sendNext(i)
		}
	}
	time.Sleep(cfg.duration)
	running.Store(false)
	res.echoes = echoes.Load()
	res.wall = time.Since(start)
	res.clientCPU = time.Duration(cpuTime() - clientBefore)
	after, err := ch.ask("stats")
	if err != nil {
		return res, err
	}
	res.serverCPU = time.Duration(after.CPU - before.CPU)
	res.bad = bad.Load()
	return res, nil
}
