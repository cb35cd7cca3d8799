package main

// Row 1: telemetry under loss. Sessions send a 64-byte reliable message
// every period for a fixed time through the lossy relay (delay each way,
// Bernoulli loss each way); the server application records each message's
// latency from the client's send to its own receipt (one process, one
// clock) and checks that every session's messages arrive once, in order.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// telemetryConfig is one run.
type telemetryConfig struct {
	sessions int
	period   time.Duration // between one session's messages
	duration time.Duration // of sending
	drain    time.Duration // at most, after sending, for the last messages
	loss     float64       // each way
	delay    time.Duration // each way
	seed     uint64
	// sockets the sessions share (0: one each); the relay then sees, and
	// the server gets, one source address per socket.
	sockets int
}

// telemetryResult is what one stack did in one run.
type telemetryResult struct {
	stack      string
	loss       float64
	sent       int
	sentBy     []int // per session
	sum        summary
	rec        *recorder
	bytesUp    uint64 // on the wire, client -> server, while the load ran
	bytesDown  uint64
	payload    uint64
	sendErrors int64
}

func (r telemetryResult) wireBoth() float64 {
	return float64(r.bytesUp+r.bytesDown) / float64(max(r.payload, 1))
}
func (r telemetryResult) wireUp() float64 { return float64(r.bytesUp) / float64(max(r.payload, 1)) }

// complete: every message sent arrived once, in order, intact.
func (r telemetryResult) complete() bool {
	return r.sum.delivered == r.sent && r.sum.dups == 0 && r.sum.gaps == 0 && r.sum.bad == 0
}

func runTelemetry(st stack, cfg telemetryConfig) (telemetryResult, error) {
	res := telemetryResult{stack: st.name, loss: cfg.loss, sentBy: make([]int, cfg.sessions)}
	rec := newRecorder(cfg.sessions)
	res.rec = rec
	srv, err := st.serve(&serverApp{rec: rec}, cfg.sockets > 0)
	if err != nil {
		return res, fmt.Errorf("%s: serve: %w", st.name, err)
	}
	defer srv.close()
	imp := lossy.Impairment{Loss: cfg.loss, Delay: cfg.delay}
	rl, err := startRelay(srv.addr(), lossy.Config{Seed: cfg.seed, Up: imp, Down: imp})
	if err != nil {
		return res, err
	}
	defer rl.close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := st.dial(ctx, dialConfig{server: rl.addr(), n: cfg.sessions, sockets: cfg.sockets})
	if err != nil {
		return res, fmt.Errorf("%s: dial: %w", st.name, err)
	}
	defer cs.close()
	if up := cs.established(); up < cfg.sessions {
		return res, fmt.Errorf("%s: %d of %d sessions established", st.name, up, cfg.sessions)
	}
	before := rl.stats()
	var sendErrors atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cfg.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.sentBy[i] = sendTelemetry(cs, i, start, cfg, &sendErrors)
		}()
	}
	wg.Wait()
	for _, n := range res.sentBy {
		res.sent += n
	}
	for deadline := time.Now().Add(cfg.drain); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if rec.totalDelivered() >= res.sent {
			break
		}
	}
	after := rl.stats()
	res.sum = rec.summary()
	res.bytesUp = after.Up.BytesSent - before.Up.BytesSent
	res.bytesDown = after.Down.BytesSent - before.Down.BytesSent
	res.payload = uint64(res.sent) * msgSize
	res.sendErrors = sendErrors.Load()
	return res, nil
}

// sendTelemetry is session i's load: a message every period, the sessions
// staggered across the period; it returns how many it sent.
func sendTelemetry(cs clients, i int, start time.Time, cfg telemetryConfig, errs *atomic.Int64) int {
	offset := cfg.period * time.Duration(i) / time.Duration(cfg.sessions)
	end := start.Add(cfg.duration)
	buf := make([]byte, msgSize)
	sent := 0
	for next := start.Add(offset); next.Before(end); next = next.Add(cfg.period) {
		time.Sleep(time.Until(next))
		if err := cs.send(i, fillMessage(buf, uint32(i), uint64(sent), sinceEpoch())); err != nil {
			errs.Add(1)
			continue
		}
		sent++
	}
	return sent
}
