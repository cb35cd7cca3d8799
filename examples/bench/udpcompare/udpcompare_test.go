package main

import (
	"os"
	"testing"
	"time"
)

// TestMain lets the test binary be the idle and echo rows' child server.
func TestMain(m *testing.M) {
	if childMain() {
		return
	}
	os.Exit(m.Run())
}

// TestEveryStackDeliversInOrder runs each stack's telemetry briefly at
// 10 % loss each way through the relay, with one socket per session and
// with the sessions sharing one socket (the idle row's way, which for
// kcp-go goes through convConn and kcpMux): every message sent must
// reach the server application exactly once, in order, intact.
func TestEveryStackDeliversInOrder(t *testing.T) {
	for _, st := range stacks {
		for _, shared := range []int{0, 1} {
			name := st.name + "/own-sockets"
			if shared > 0 {
				name = st.name + "/one-socket"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				cfg := telemetryConfig{sessions: 3, period: 20 * time.Millisecond, duration: 2 * time.Second,
					drain: 60 * time.Second, loss: 0.1, delay: 10 * time.Millisecond, seed: 7, sockets: shared}
				r, err := runTelemetry(st, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if r.sent < cfg.sessions*10 {
					t.Fatalf("only %d messages sent", r.sent)
				}
				for i, n := range r.sentBy {
					if got := r.rec.delivered(i); got != n {
						t.Errorf("session %d: %d of %d messages delivered in order", i, got, n)
					}
				}
				if r.sum.dups != 0 || r.sum.gaps != 0 || r.sum.bad != 0 {
					t.Errorf("%d duplicated, %d out of order, %d malformed", r.sum.dups, r.sum.gaps, r.sum.bad)
				}
				if r.bytesUp == 0 || r.bytesDown == 0 {
					t.Errorf("the relay counted %d bytes up, %d down", r.bytesUp, r.bytesDown)
				}
				t.Logf("%d messages; p99 %.1f ms; %.2f wire B per payload B", r.sent, ms(percentile(r.sum.latencies, 99)), r.wireBoth())
			})
		}
	}
}
