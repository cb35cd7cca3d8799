package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

func TestCheck(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "-c", "../../../examples/edgemux.yaml"}, &out, &errOut); code != 0 {
		t.Fatalf("example config: code %d: %s", code, errOut.String())
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("listen: 127.0.0.1:5020\nlimits:\n  max_conns: -4\nsniff:\n  budget: 3\ndispatch:\n  policy: fastest\n"), 0o644)
	out.Reset()
	errOut.Reset()
	if code := run([]string{"check", "-c", bad}, &out, &errOut); code != 1 {
		t.Fatalf("bad config: code %d, want 1", code)
	}
	// Every problem at once, each with its field path and line.
	for _, want := range []string{"limits.max_conns", "(line 3)", "sniff.budget", "(line 5)", "dispatch.policy", "(line 7)"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("check output lacks %q:\n%s", want, errOut.String())
		}
	}
	errOut.Reset()
	if code := run([]string{"check"}, &out, &errOut); code != 2 {
		t.Fatalf("check without -c: code %d, want 2", code)
	}
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown command: code %d, want 2", code)
	}
}

// TestSignals runs the real binary: SIGHUP reloads without dropping a live
// device connection, SIGTERM drains and exits 0.
func TestSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	cfgFile := filepath.Join(t.TempDir(), "edgemux.yaml")
	os.WriteFile(cfgFile, []byte("listen: 127.0.0.1:0\nloops: 1\n"), 0o644)
	cmd, logs := spawn(t, bin, "run", "-c", cfgFile)
	addr := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`).FindStringSubmatch(waitLog(t, logs, "addr=127.0.0.1:"))[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := private.Dial(ctx, addr, "sig-test", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()

	// The reload also applies limits.memory_limit and log.level, which the
	// binary owns.
	os.WriteFile(cfgFile, []byte("listen: 127.0.0.1:0\nloops: 1\nlimits: {memory_limit: 67108864}\nlog: {level: debug}\n"), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, logs, "bytes=67108864")
	waitLog(t, logs, "to=DEBUG")
	waitLog(t, logs, `msg="reload ok" changed=[limits.memory_limit,log.level]`)
	if err := dev.Ping(ctx); err != nil {
		t.Fatalf("device after reload: %v", err)
	}
	if err := dev.Publish("a/b", []byte("x"), true); err != nil {
		t.Fatalf("publish after reload: %v", err)
	}
	// The client commands as a script runs them: the binary's exit code.
	if out, err := exec.Command(bin, "get", "-s", addr, "-t", "a/b").Output(); err != nil || string(out) != "x\n" {
		t.Fatalf("edgemux get a/b: %q, %v", out, err)
	}
	if err := exec.Command(bin, "pub", "-s", addr, "-t", "a/c", "-m", "21.5").Run(); err != nil {
		t.Fatalf("edgemux pub: %v", err)
	}
	var exit *exec.ExitError
	if err := exec.Command(bin, "get", "-s", addr, "-t", "never/set").Run(); !errors.As(err, &exit) || exit.ExitCode() != exitRefused {
		t.Fatalf("edgemux get of a missing topic: %v, want exit %d", err, exitRefused)
	}
	// SIGTERM drains: every session hears its protocol's goodbye, the
	// peers hang up, and the last log line says nothing was cut.
	ws, _, err := gws.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _, err = ws.ReadMessage()
	var ce *gws.CloseError
	if !errors.As(err, &ce) || ce.Code != gws.CloseGoingAway {
		t.Fatalf("websocket client at SIGTERM: %v, want close 1001", err)
	}
	ws.Close()
	for range dev.Messages() { // closed when the connection ends
	}
	if !errors.Is(dev.Err(), private.CodeGoingAway) {
		t.Fatalf("device at SIGTERM: %v, want GOING_AWAY", dev.Err())
	}
	waitLog(t, logs, "msg=stopped")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("still accepting after exit")
	}
}

// spawn runs bin with args until the test ends (then kills it), and
// returns it and its stderr a line at a time; the channel closes when the
// process ends. Lines nobody reads past the first 1,000 are dropped: a
// log nobody reads must never block the process.
func spawn(t *testing.T, bin string, args ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	logs := make(chan string, 1000)
	go func() {
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			select {
			case logs <- lines.Text():
			default:
			}
		}
		close(logs)
	}()
	return cmd, logs
}

// waitLog returns the first line from logs that contains want.
func waitLog(t *testing.T, logs <-chan string, want string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-logs:
			if !ok {
				t.Fatalf("log ended before %q", want)
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q in the log", want)
		}
	}
}

// TestGCPercent: limits.gc_percent wins; 0 means the environment's GOGC,
// or config.DefaultGCPercent without one.
func TestGCPercent(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	log := slog.New(slog.DiscardHandler)
	steps := func(gc gcPercent, want0 int) {
		t.Helper()
		for _, step := range []struct{ percent, want int }{{0, want0}, {200, 200}, {0, want0}, {30, 30}} {
			gc.apply(step.percent, log)
			if got := debug.SetGCPercent(-1); got != step.want {
				t.Fatalf("gc_percent %d: GOGC %d, want %d", step.percent, got, step.want)
			} else {
				debug.SetGCPercent(got)
			}
		}
	}
	debug.SetGCPercent(100) // the runtime's own, no GOGC in the environment
	steps(newGCPercent(""), config.DefaultGCPercent)
	debug.SetGCPercent(80) // as GOGC=80 in the environment leaves it
	steps(newGCPercent("80"), 80)
}

func TestMemoryLimit(t *testing.T) {
	mem := newMemoryLimit()
	t.Cleanup(func() { debug.SetMemoryLimit(mem.initial) })
	log := slog.New(slog.DiscardHandler)
	mem.apply(64<<20, log)
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Errorf("limit after apply = %d", got)
	}
	mem.apply(0, log)
	if got := debug.SetMemoryLimit(-1); got != mem.initial {
		t.Errorf("limit after apply(0) = %d, want the initial %d", got, mem.initial)
	}
}
