package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (100 on every Linux the gateway runs on).
const clockTick = 100

// cpuSeconds is a process's user+system CPU time so far, from
// /proc/PID/stat (fields 14 and 15).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it are plain.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	k, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return float64(u+k) / clockTick, nil
}

// statusKB is a field of /proc/PID/status in kB (VmHWM: peak RSS; VmRSS).
func statusKB(pid int, field string) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// child is a mode of this program run as a process of its own, its
// standard output read line by line.
type child struct {
	cmd   *exec.Cmd
	lines chan string
	wg    sync.WaitGroup
}

// start runs this executable with args; its stderr is ours.
func start(args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: exec.Command(exe, args...), lines: make(chan string, 1024)}
	c.cmd.Stderr = os.Stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	c.wg.Add(1)
	go c.read(out)
	return c, nil
}

func (c *child) read(out io.Reader) {
	defer c.wg.Done()
	defer close(c.lines)
	s := bufio.NewScanner(out)
	for s.Scan() {
		c.lines <- s.Text()
	}
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// await returns the child's next line starting with prefix, skipping
// others (passed to fn if not nil), or an error when it exits or
// timeout passes first.
func (c *child) await(prefix string, timeout time.Duration, fn func(string)) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				return "", fmt.Errorf("%s exited before %q", c.cmd.Args[1], prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line, nil
			}
			if fn != nil {
				fn(line)
			}
		case <-t.C:
			return "", fmt.Errorf("%s: no %q within %v", c.cmd.Args[1], prefix, timeout)
		}
	}
}

// stop sends SIGTERM, waits up to 10 s, then kills; by pid, ours only.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
	c.wg.Wait()
}

// fields parses "key=value" words of a result line.
func fields(line string) map[string]string {
	m := map[string]string{}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			m[k] = v
		}
	}
	return m
}

func num(m map[string]string, k string) float64 {
	f, _ := strconv.ParseFloat(m[k], 64)
	return f
}

// selfUsage is this process's CPU seconds so far and its peak RSS in kB.
func selfUsage() (cpu float64, hwmKB int) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	hwmKB, _ = statusKB(os.Getpid(), "VmHWM")
	return cpu, hwmKB
}

func numCPU() int { return runtime.NumCPU() }
