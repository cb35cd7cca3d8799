package main

// The smoke test: every server of the comparison, in this process, answers
// the load generator's requests of every size, closed and open loop, with
// the echo it expects (the generator checks every answer's type and
// length), and the report renders edgemux's ratio row. No figure is
// asserted: the machine is shared.

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/gateway"
)

// freeAddr is a loopback address with a port free a moment ago (gnet and
// nbio want a concrete port to listen on).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startPeer runs one of the peers until the test ends.
func startPeer(t *testing.T, kind string) string {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	serve := map[string]func(context.Context, string, func(net.Addr)) error{
		"gonet": serveGoNet, "gnet": serveGnet,
		"nbio": func(ctx context.Context, addr string, ready func(net.Addr)) error {
			return serveNbio(ctx, addr, 0, ready)
		},
	}[kind]
	go func() { done <- serve(ctx, addr, func(net.Addr) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("%s: %v", kind, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start", kind)
	}
	t.Cleanup(func() { cancel(); <-done })
	return addr
}

// startEdgemux runs the gateway with the comparison's own config.
func startEdgemux(t *testing.T) string {
	cfg, err := config.Load("edgemux.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	g, err := gateway.New(cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	select {
	case <-g.Ready():
	case err := <-done:
		t.Fatalf("edgemux: %v", err)
	}
	t.Cleanup(func() { g.Close(); <-done })
	return g.Addr().String()
}

func TestEveryServerEchoes(t *testing.T) {
	var rows []result
	for _, name := range []string{"edgemux", "gonet", "gnet", "nbio"} {
		t.Run(name, func(t *testing.T) {
			var addr string
			if name == "edgemux" {
				addr = startEdgemux(t)
			} else {
				addr = startPeer(t, name)
			}
			c := loadConfig{addr: addr, server: name, pin: "default", mode: "connect", pid: os.Getpid(),
				active: 4, sources: 4, warmup: 50 * time.Millisecond, duration: 300 * time.Millisecond}
			r, err := runLoad(c)
			if err != nil || r.Errors != 0 || r.Requests == 0 {
				t.Fatalf("connect: %d cycles, %d errors, %v", r.Requests, r.Errors, err)
			}
			rows = append(rows, r)
			for _, mode := range []string{"closed", "open"} {
				for _, size := range []int{20, 64, 1024} {
					c := loadConfig{addr: addr, server: name, pin: "default", mode: mode,
						pid: os.Getpid(), conns: 40, active: 10, size: size, sources: 4, rate: 2000, prime: 3,
						warmup: 50 * time.Millisecond, duration: 300 * time.Millisecond}
					r, err := runLoad(c)
					if err != nil {
						t.Fatalf("%s %d B: %v", mode, size, err)
					}
					if r.Errors != 0 || r.DialFailed != 0 || r.Requests == 0 {
						t.Fatalf("%s %d B: %d requests, %d errors, %d failed dials", mode, size, r.Requests, r.Errors, r.DialFailed)
					}
					// The window read the threads' context switches (this
					// process: the servers run in it), a count, no timing.
					if r.Switches <= 0 {
						t.Fatalf("%s %d B: no context switches read for %d requests", mode, size, r.Requests)
					}
					rows = append(rows, r)
				}
			}
		})
	}
	report := renderReport(rows)
	for _, want := range []string{"edgemux / best peer", "| 40/10 | 1024 | nbio |", "server default, open loop", "switches/req", "user us/req"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	t.Log(report)
}

// TestMediansOfRepeatedRuns: three runs of one server on a row are
// reported as the median of each figure with the CPU range, errors and
// requests summed; a server run once keeps its figures. The idle cell
// shows the file-backed part when it was read.
func TestMediansOfRepeatedRuns(t *testing.T) {
	run := func(server string, cpu, rps float64, errs int64) result {
		r := result{Server: server, Pin: "pinned", Mode: "closed", Conns: 10, Active: 10, Size: 64,
			Requests: 100, RPS: rps, CPUus: cpu, P99us: cpu * 100, Errors: errs, IdleBytes: cpu * 30}
		switch server {
		case "edgemux":
			r.IdleFile = cpu * 10
		case "gnet":
			r.IdleFile = -0.4 // a page reclaimed: shown as nothing
		}
		return r
	}
	g := []result{run("edgemux", 17.6, 50000, 0), run("gnet", 12.2, 76000, 0), run("edgemux", 12.9, 72000, 1), run("edgemux", 13.4, 70000, 0)}
	got, spread := medians(g)
	if len(got) != 2 || got[0].Server != "edgemux" || got[1].Server != "gnet" {
		t.Fatalf("medians: %+v", got)
	}
	e := got[0]
	if e.CPUus != 13.4 || e.RPS != 70000 || e.P99us != 1340 || e.Requests != 300 || e.Errors != 1 {
		t.Errorf("edgemux median: CPU %v, req/s %v, p99 %v, requests %d, errors %d; want 13.4, 70000, 1340, 300, 1",
			e.CPUus, e.RPS, e.P99us, e.Requests, e.Errors)
	}
	if spread["edgemux"] != " (12.9-17.6, 3 runs)" || spread["gnet"] != "" {
		t.Errorf("spread: %q", spread)
	}
	if got[1] != g[1] {
		t.Errorf("a server run once changed: %+v", got[1])
	}
	report := renderReport(g)
	if !strings.Contains(report, "| 13.4 (12.9-17.6, 3 runs) |") {
		t.Errorf("report lacks the median and range:\n%s", report)
	}
	if !strings.Contains(report, "| 402 (file 134) |") || !strings.Contains(report, "| 366 |") {
		t.Errorf("report lacks the idle cells (edgemux's with its file-backed part, gnet's without):\n%s", report)
	}
}
