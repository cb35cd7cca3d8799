// Package upstreamtest starts real Modbus devices for tests, in the style
// of net/http/httptest: pymodbus (Debian's python3-pymodbus, run by
// /usr/bin/python3) serving Modbus TCP on a loopback port or RTU on one
// end of a socat pty pair. Everything started is stopped in t.Cleanup.
//
// The devices hold holding register i = 1000+i, input register i =
// 2000+i, coil i = i%2 and discrete input i = (i+1)%2, for unit ids given;
// other unit ids stay silent, like a device that is not there.
package upstreamtest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const installHint = "run `make deps` (.ci/deps installs python3-pymodbus, python3-serial and socat with apt-get)"

// Python is Debian's interpreter, which has python3-pymodbus; the first
// python3 on PATH may be another one without Debian's packages.
const Python = "/usr/bin/python3"

// Require fails the test (skips it with -short) when pymodbus or socat is
// missing.
func Require(t testing.TB) {
	t.Helper()
	err := exec.Command(Python, "-c", "import pymodbus.server, serial").Run()
	if err == nil {
		_, err = exec.LookPath("socat")
	}
	if err != nil {
		if testing.Short() {
			t.Skip("-short: pymodbus or socat missing: " + installHint)
		}
		t.Fatalf("pymodbus or socat missing (%v): %s", err, installHint)
	}
}

// script is the path of pydevice.py, next to this file.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "pydevice.py")
}

// units is the unit id list pydevice.py takes.
func units(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}

// TCPDevice starts a pymodbus Modbus TCP device answering unit ids ids on
// a free loopback port and returns its address once it accepts.
func TCPDevice(t testing.TB, ids ...int) string {
	t.Helper()
	addr, _ := StoppableTCPDevice(t, ids...)
	return addr
}

// StoppableTCPDevice is TCPDevice with a stop function, which ends the
// device (its connections close, new ones are refused) and returns once
// it has exited.
func StoppableTCPDevice(t testing.TB, ids ...int) (addr string, stop func()) {
	t.Helper()
	Require(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	stop = start(t, script(), "tcp", port, units(ids))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr, stop
		}
		if time.Now().After(deadline) {
			t.Fatalf("pymodbus device at %s never accepted: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RTUDevice starts a pymodbus RTU device answering unit ids ids on one
// end of a new pty pair (at baud, 8N1) and returns the other end's path,
// for the master. Its readiness cannot be seen from outside: callers
// retry their first request (the line's retries do).
func RTUDevice(t testing.TB, baud int, ids ...int) string {
	t.Helper()
	Require(t)
	master, device := PtyPair(t)
	start(t, script(), "rtu", device, strconv.Itoa(baud), units(ids))
	return master
}

// PtyPair starts socat linking two ptys and returns their paths.
func PtyPair(t testing.TB) (a, b string) {
	t.Helper()
	Require(t)
	cmd := exec.Command("socat", "-d", "-d", "pty,raw,echo=0", "pty,raw,echo=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var paths []string
	sc := bufio.NewScanner(stderr)
	for len(paths) < 2 && sc.Scan() {
		if i := strings.Index(sc.Text(), "PTY is "); i >= 0 {
			paths = append(paths, strings.TrimSpace(sc.Text()[i+len("PTY is "):]))
		}
	}
	if len(paths) < 2 {
		t.Fatalf("socat did not say its ptys: %v", sc.Err())
	}
	go func() { // keep reading so socat never blocks on its log
		for sc.Scan() {
		}
	}()
	return paths[0], paths[1]
}

// start runs pydevice.py until the test ends or stop is called.
func start(t testing.TB, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, Python, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start pydevice: %v", err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); cmd.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// Wait polls cond every 20 ms until it is true or the deadline (generous:
// the machines are shared) passes, then fails with what.
func Wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(fmt.Sprintf("timed out waiting for %s", what))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
