package main

// The server side of the idle and echo rows runs in a child process (this
// program again, told so by UDPCOMPARE_CHILD), so its memory and CPU time
// are the server's alone, not the clients'. It prints its address, then
// answers commands on stdin with one JSON line each: "mem" (after a
// forced collection that also returns freed pages to the OS), "stats",
// "heapprofile", "quit".

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const childEnv = "UDPCOMPARE_CHILD" // "stack,echo|idle"

// childStats is what the child reports.
type childStats struct {
	Msgs       int64  // messages the application received
	Sessions   int64  // open, as the stack told the application
	Heap       uint64 // Go heap in use (HeapInuse), bytes
	Live       uint64 // of which live objects (HeapAlloc), bytes
	Stacks     uint64 // goroutine stacks (StackInuse), bytes
	RSS        uint64 // VmRSS, bytes
	CPU        int64  // user + system time, ns
	Goroutines int
}

// childMain runs the child when the environment says so; it reports
// whether it did.
func childMain() bool {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false
	}
	name, mode, _ := strings.Cut(spec, ",")
	if err := runChild(name, mode == "echo"); err != nil {
		fmt.Fprintln(os.Stderr, "udpcompare child:", err)
		os.Exit(1)
	}
	return true
}

func runChild(name string, echo bool) error {
	st, ok := stackNamed(name)
	if !ok {
		return fmt.Errorf("no stack %q", name)
	}
	app := &serverApp{echo: echo}
	srv, err := st.serve(app, !echo) // the idle row's clients share sockets
	if err != nil {
		return err
	}
	defer srv.close()
	fmt.Printf("addr %s\n", srv.addr())
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		switch in.Text() {
		case "mem":
			runtime.GC()
			debug.FreeOSMemory() // a collection, and freed pages back to the OS: RSS is what is held
			out.Encode(measure(app))
		case "stats":
			out.Encode(measure(app))
		case "heapprofile":
			// UDPCOMPARE_HEAPPROFILE names a file for a heap profile.
			if path := os.Getenv("UDPCOMPARE_HEAPPROFILE"); path != "" {
				if f, err := os.Create(path); err == nil {
					pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
			out.Encode(measure(app))
		case "quit":
			return nil
		}
	}
	return in.Err()
}

func measure(app *serverApp) childStats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return childStats{Msgs: app.msgs.Load(), Sessions: app.sessions(), Heap: ms.HeapInuse, Live: ms.HeapAlloc, Stacks: ms.StackInuse,
		RSS: rss(), CPU: cpuTime(), Goroutines: runtime.NumGoroutine()}
}

// cpuTime is this process's user and system time so far.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// rss is VmRSS from /proc/self/status, bytes.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// child is the parent's handle on a running child.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr netip.AddrPort
}

func startChild(name string, echo bool) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	mode := "idle"
	if echo {
		mode = "echo"
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+name+","+mode)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	if !c.out.Scan() {
		c.stop()
		return nil, fmt.Errorf("child %s: no address (%v)", name, c.out.Err())
	}
	a, ok := strings.CutPrefix(c.out.Text(), "addr ")
	if c.addr, err = netip.ParseAddrPort(a); !ok || err != nil {
		c.stop()
		return nil, fmt.Errorf("child %s: said %q", name, c.out.Text())
	}
	return c, nil
}

// ask sends a command and reads the answer.
func (c *child) ask(cmd string) (childStats, error) {
	var s childStats
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		return s, err
	}
	if !c.out.Scan() {
		return s, fmt.Errorf("child: no answer to %s (%v)", cmd, c.out.Err())
	}
	return s, json.Unmarshal(c.out.Bytes(), &s)
}

// stop asks the child to quit and waits; a child that does not is killed
// (by its own pid).
func (c *child) stop() {
	fmt.Fprintln(c.in, "quit")
	c.in.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
