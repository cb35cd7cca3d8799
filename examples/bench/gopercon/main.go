// Command gopercon is the goroutine-per-connection baseline for
// examples/bench/idle.sh: net.Listen, one goroutine per connection reading
// into its own 4 KiB buffer, and the same ACK bytes edgemux sends for a
// private-protocol HELLO. It does nothing else, so what an idle connection
// costs here is the floor of the classic Go server design.
//
//	gopercon -addr 127.0.0.1:5021 -metrics 127.0.0.1:5022
//
// The metrics address serves the few series idle.sh reads, named as
// edgemux's /metrics names them (go_goroutines, go_memstats_heap_inuse_bytes,
// process_resident_memory_bytes) plus gopercon_connections. SIGTERM or
// SIGINT ends it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/edgemux/edgemux/protocols/private"
)

// Limits.
const (
	readBuf     = 4 << 10 // per connection, as a typical goroutine-per-conn server has
	maxConnsCap = 1 << 20
	maxFrame    = readBuf - private.HeaderLen // a frame must fit the buffer
)

var errFrame = errors.New("gopercon: bad frame")

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("gopercon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:5021", "TCP address for devices")
	metrics := fs.String("metrics", "127.0.0.1:5022", "HTTP address for /metrics")
	maxConns := fs.Int("max-conns", 20000, "connections at once, at most")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *maxConns < 1 || *maxConns > maxConnsCap {
		fmt.Fprintf(stderr, "gopercon: -max-conns %d: want 1..%d\n", *maxConns, maxConnsCap)
		return 2
	}
	raiseFileLimit()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := listen(*addr, *metrics, *maxConns)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "gopercon: listening on %s, metrics on %s\n", s.ln.Addr(), s.mln.Addr())
	<-ctx.Done()
	s.close()
	return 0
}

// server is the baseline server and its metrics endpoint.
type server struct {
	ln, mln net.Listener
	http    *http.Server
	conns   atomic.Int64
	slots   chan struct{} // one token per connection allowed
	wg      sync.WaitGroup
}

func listen(addr, metrics string, maxConns int) (*server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mln, err := net.Listen("tcp", metrics)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &server{ln: ln, mln: mln, slots: make(chan struct{}, maxConns)}
	s.http = &http.Server{Handler: http.HandlerFunc(s.serveMetrics)}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.http.Serve(mln) }()
	go func() { defer s.wg.Done(); s.accept() }()
	return s, nil
}

func (s *server) close() {
	s.ln.Close()
	s.http.Close()
	s.wg.Wait()
}

func (s *server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // EMFILE and friends: the baseline just keeps trying
		}
		select {
		case s.slots <- struct{}{}:
		default:
			c.Close()
			continue
		}
		s.conns.Add(1)
		go s.serve(c)
	}
}

// serve is the goroutine of one connection: read, answer HELLO, repeat.
// Connections are not tracked for shutdown: the process exits instead.
func (s *server) serve(c net.Conn) {
	defer func() {
		c.Close()
		s.conns.Add(-1)
		<-s.slots
	}()
	buf := make([]byte, readBuf)
	have := 0
	for {
		n, err := c.Read(buf[have:])
		if err != nil {
			return
		}
		have += n
		out, used, err := answer(nil, buf[:have])
		if err != nil {
			return
		}
		have = copy(buf, buf[used:have])
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}
}

// answer appends an ACK to out for every HELLO among the whole frames at
// the start of in and returns the bytes it used; other frames are ignored.
func answer(out, in []byte) ([]byte, int, error) {
	used := 0
	for {
		f, n, err := private.ParseFrame(in[used:], maxFrame)
		if err != nil {
			return out, used, fmt.Errorf("%w: %w", errFrame, err)
		}
		if n == 0 {
			return out, used, nil
		}
		used += n
		if f.Type == private.TypeHello {
			out = private.AppendAck(out, private.Ack{})
		}
	}
}

func (s *server) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "gopercon_connections %d\n", s.conns.Load())
	fmt.Fprintf(w, "go_goroutines %d\n", runtime.NumGoroutine())
	fmt.Fprintf(w, "go_memstats_heap_inuse_bytes %d\n", ms.HeapInuse)
	fmt.Fprintf(w, "go_memstats_stack_inuse_bytes %d\n", ms.StackInuse)
	fmt.Fprintf(w, "process_resident_memory_bytes %d\n", residentBytes())
}

// residentBytes reads the resident set from /proc/self/statm (pages).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard one.
func raiseFileLimit() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}
