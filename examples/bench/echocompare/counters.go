package main

// The server's counters around the measured window: CPU time (and its
// user-space part: the kernel's side of an echo is about the same for
// every server, so what a server's own code costs shows there), the
// context switches of all its threads (/proc/PID/task/*/status), and,
// with -syscalls, its system calls as perf stat counts them (the
// raw_syscalls:sys_enter tracepoint, every thread of the process), and
// of those the epoll waits (epoll_wait and epoll_pwait: a server that
// waits once per batch of events makes well under one per request, one
// that goes idle between requests one or more, each costing a wake). Per
// request, they say where a server's CPU goes: a server that makes more
// system calls or is switched out more often per request pays for it in
// the kernel, whatever its user-space code costs.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverWindow is one measured window's counters, read at its start.
type serverWindow struct {
	pid      int
	cpu0     float64
	user0    float64
	switches int64
	t0       time.Time
	perf     *exec.Cmd // nil: syscalls not counted
	perfOut  string
}

// openWindow reads the counters at the window's start and, if syscalls,
// starts perf stat on the server (it attaches within tens of ms, about
// 1 % of a 5 s window; its count is not taken if perf is missing or
// refuses).
func openWindow(pid int, syscalls bool) *serverWindow {
	w := &serverWindow{pid: pid, switches: procSwitches(pid), t0: time.Now()}
	w.cpu0, w.user0 = procCPU(pid)
	if !syscalls || pid <= 0 {
		return w
	}
	f, err := os.CreateTemp("", "echocompare-perf-*.csv")
	if err != nil {
		return w
	}
	f.Close()
	cmd := exec.Command("perf", "stat", "-x,", "-e", perfEvents, "-p", strconv.Itoa(pid), "-o", f.Name())
	if cmd.Start() == nil {
		w.perf, w.perfOut = cmd, f.Name()
	} else {
		os.Remove(f.Name())
	}
	return w
}

// close reads the counters at the window's end and puts n requests'
// figures into r: requests/s, CPU, switches and system calls per request.
func (w *serverWindow) close(r *result, n int64) {
	cpu1, user1 := procCPU(w.pid)
	sw1, t1 := procSwitches(w.pid), time.Now()
	syscalls, epollWaits := w.stopPerf()
	r.Requests = n
	r.RPS = float64(n) / t1.Sub(w.t0).Seconds()
	if n <= 0 {
		return
	}
	if w.cpu0 >= 0 && cpu1 >= 0 {
		r.CPUus = (cpu1 - w.cpu0) * 1e6 / float64(n)
		r.UserUs = (user1 - w.user0) * 1e6 / float64(n)
	}
	if w.switches >= 0 && sw1 >= w.switches {
		r.Switches = float64(sw1-w.switches) / float64(n)
	}
	if syscalls > 0 {
		r.Syscalls = float64(syscalls) / float64(n)
	}
	if epollWaits >= 0 {
		r.EpollWaits = float64(epollWaits) / float64(n)
	}
}

// perfEvents are the tracepoints perf stat counts: every system call, and
// the two epoll waits (Go's runtime and x/sys/unix use either, by
// architecture and version).
const perfEvents = "raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait"

// stopPerf ends perf stat (SIGINT makes it print its counts) and returns
// the system calls and the epoll waits it counted, -1 for what it did
// not count.
func (w *serverWindow) stopPerf() (syscalls, epollWaits int64) {
	syscalls, epollWaits = -1, -1
	if w.perf == nil {
		return
	}
	defer os.Remove(w.perfOut)
	w.perf.Process.Signal(syscall.SIGINT)
	if err := w.perf.Wait(); err != nil && w.perf.ProcessState == nil {
		return
	}
	b, err := os.ReadFile(w.perfOut)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch f[2] {
		case "raw_syscalls:sys_enter":
			syscalls = v
		case "syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait":
			epollWaits = max(epollWaits, 0) + v
		}
	}
	return
}

// procSwitches sums the voluntary and involuntary context switches of
// every thread of pid (/proc/PID/status alone has the main thread's), or
// -1. A thread that ends within the window takes its count with it; Go
// servers keep their threads.
func procSwitches(pid int) int64 {
	if pid <= 0 {
		return -1
	}
	paths, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/status")
	if err != nil || len(paths) == 0 {
		return -1
	}
	var n int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
	}
	return n
}
