package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/private"
)

// TestSlowlorisClosedAtSniffDeadline: thousands of connections trickle an
// HTTP request line one byte per second. Trickling must not extend the
// sniff deadline: every one is quarantined as a timeout (none lives long
// enough to be classified as HTTP, which takes 8 bytes for "OPTIONS ") and
// closed by the gateway, while a private-protocol device keeps publishing
// and receiving its own messages.
func TestSlowlorisClosedAtSniffDeadline(t *testing.T) {
	n := 5000
	if testing.Short() {
		n = 500
	}
	cfg := rbConfig(t)
	cfg.Sniff.Deadline = 2 * time.Second
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()

	good := rbDialClient(t, addr, "good-device")
	if err := good.Subscribe("robust/good"); err != nil {
		t.Fatal(err)
	}
	var slowOpen atomic.Int64 // slowloris connections the gateway has not closed yet
	var slowPeak atomic.Int64 // the most open at once
	var maxSent atomic.Int64  // most bytes one slowloris connection sent before its close
	stop := make(chan struct{})
	var goodOK atomic.Int64
	var goodBusiest atomic.Int64 // the most slowloris connections open at a round trip's end
	goodErr := make(chan error, 1)
	go func() {
		defer close(goodErr)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := rbRoundTrip(good, "robust/good", fmt.Appendf(nil, "reading %d", i)); err != nil {
				goodErr <- fmt.Errorf("round trip %d: %w", i, err)
				return
			}
			goodOK.Add(1)
			rbStoreMax(&goodBusiest, slowOpen.Load())
		}
	}()

	const tricklers = 5
	errs := make(chan error, tricklers)
	var wg sync.WaitGroup
	for w := range tricklers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- rbTrickle(addr, w, tricklers, n, &rbSlowloris{open: &slowOpen, peak: &slowPeak, maxSent: &maxSent})
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if err := <-goodErr; err != nil {
		t.Errorf("private device during the slowloris: %v", err)
	}
	t.Logf("slowloris: at most %d open at once, each sent at most %d bytes before the gateway closed it; "+
		"private round trips: %d, one of them with %d slowloris connections open",
		slowPeak.Load(), maxSent.Load(), goodOK.Load(), goodBusiest.Load())
	// The quarantine closes a timeout landing when its hold ends or when
	// its sample is full, whichever comes first. At one byte per second,
	// deadline and hold (2 s + 2 s) end 16 times sooner than 64 bytes
	// take: a connection that got its whole sample out was kept open by
	// its own trickle, not by the hold.
	if sent := maxSent.Load(); sent >= int64(cfg.Quarantine.SampleBytes) {
		t.Errorf("a slowloris connection sent %d bytes before its close: trickling extended its hold", sent)
	}
	// How many slowloris connections are open at once depends on how fast
	// they can be opened on this machine; the device must have worked
	// through the thick of it, whatever that was.
	if goodBusiest.Load() < slowPeak.Load()/2 {
		t.Errorf("no private round trip completed while many slowloris connections were open (%d at most; peak %d)",
			goodBusiest.Load(), slowPeak.Load())
	}
	eventually(t, "every slowloris connection in the quarantine book", func() bool {
		return g.Book().Stats().Reasons[protocols.ReasonTimeout] >= uint64(n)
	})
	st := g.Book().Stats()
	if st.Reasons[protocols.ReasonTimeout] != uint64(n) || st.Landings != uint64(n) {
		t.Errorf("quarantine book: %v, want exactly %d timeouts", st.Reasons, n)
	}
}

var rbSlowlorisRequest = []byte("OPTIONS /slowloris HTTP/1.1\r\nHost: edgemux.test\r\nX-Trickle: ")

// rbSlowByte is the k-th byte a slowloris client sends: the request line,
// then a header value that never ends.
func rbSlowByte(k int) []byte {
	if k < len(rbSlowlorisRequest) {
		return rbSlowlorisRequest[k : k+1]
	}
	return []byte("a")
}

// rbSlowloris is what the tricklers tell the test.
type rbSlowloris struct {
	open    *atomic.Int64 // connections the gateway has not closed yet
	peak    *atomic.Int64 // the most open at once
	maxSent *atomic.Int64 // most bytes one connection sent before its close
}

// rbStoreMax raises m to v if v is larger.
func rbStoreMax(m *atomic.Int64, v int64) {
	for old := m.Load(); v > old && !m.CompareAndSwap(old, v); old = m.Load() {
	}
}

// rbTrickle opens its share (every step-th, from first) of n slowloris
// connections and sends each one byte per second, from its own start,
// until the gateway has closed them all. It never sends faster than that.
func rbTrickle(addr string, first, step, n int, stats *rbSlowloris) error {
	type slow struct {
		c     net.Conn
		start time.Time
		sent  int
	}
	var conns []*slow
	defer func() { // on an early return
		for _, s := range conns {
			if s != nil {
				s.c.Close()
			}
		}
	}()
	toOpen := make([]int, 0, n/step+1)
	for i := first; i < n; i += step {
		toOpen = append(toOpen, i)
	}
	guard := time.Now().Add(3 * time.Minute)
	lastSweep := time.Time{}
	for live := 0; len(toOpen) > 0 || live > 0; {
		if time.Now().After(guard) {
			return fmt.Errorf("trickler %d: %d connections still open after the hang guard", first, live)
		}
		if len(toOpen) > 0 {
			c, err := rbDialFrom(addr, rbSource(toOpen[0]%5))
			if err != nil {
				return fmt.Errorf("slowloris %d: %w", toOpen[0], err)
			}
			toOpen = toOpen[1:]
			s := &slow{c: c, start: time.Now()}
			conns = append(conns, s)
			rbStoreMax(stats.peak, stats.open.Add(1))
			live++
			if err := rbWrite(c, rbSlowByte(0)); err != nil {
				return fmt.Errorf("slowloris first byte: %w", err)
			}
			s.sent = 1
			if time.Since(lastSweep) < 100*time.Millisecond {
				continue
			}
		} else {
			time.Sleep(100 * time.Millisecond)
		}
		lastSweep = time.Now()
		for i, s := range conns {
			if s == nil {
				continue
			}
			closed, err := rbTrickleOne(s.c, s.start, &s.sent)
			if err != nil {
				return err
			}
			if closed {
				rbStoreMax(stats.maxSent, int64(s.sent))
				s.c.Close()
				conns[i] = nil
				stats.open.Add(-1)
				live--
			}
		}
	}
	return nil
}

// rbTrickleOne checks whether the gateway closed c and, if not, sends the
// next byte when its second has come. Only a close (EOF or reset) ends it.
func rbTrickleOne(c net.Conn, start time.Time, sent *int) (closed bool, err error) {
	switch st := rbPeerState(c); {
	case st == io.EOF || rbIsReset(st):
		return true, nil
	case st != nil:
		return false, fmt.Errorf("slowloris peer state: %w", st)
	}
	if time.Since(start) < time.Duration(*sent)*time.Second {
		return false, nil
	}
	if err := rbWrite(c, rbSlowByte(*sent)); err != nil {
		if rbIsReset(err) {
			return true, nil
		}
		return false, fmt.Errorf("slowloris write: %w", err)
	}
	*sent++
	return false, nil
}

// The fd-exhaustion test runs the gateway in a child process (this test
// binary again) whose open-file limit is tiny, so the parent can exhaust
// it without touching its own.
const (
	rbEMFILEEnv     = "EDGEMUX_TEST_EMFILE"
	rbEMFILELimit   = 200
	rbEMFILEClients = 300
	rbEMFILEMarker  = "EMFILE-ADDR "
)

// TestEMFILEChild is the gateway side of TestEMFILERecovers; it runs only
// in the child process.
func TestEMFILEChild(t *testing.T) {
	if os.Getenv(rbEMFILEEnv) != "1" {
		t.Skip("the child process of TestEMFILERecovers")
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = rbEMFILELimit
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	cfg := rbConfig(t)
	cfg.Sniff.Deadline = 5 * time.Minute // silent clients stay; only EMFILE closes them
	g := startGateway(t, cfg, Options{})
	fmt.Printf("%s%s\n", rbEMFILEMarker, g.Addr())
	io.Copy(io.Discard, os.Stdin) // until the parent is done
}

// TestEMFILERecovers: with the gateway's file descriptors exhausted by
// silent clients, it neither dies nor spins: it counts the exhaustion
// (edgemux_emfile_total), closes what it cannot take, and once clients go
// away it accepts and serves new connections again.
func TestEMFILERecovers(t *testing.T) {
	if os.Getenv(rbEMFILEEnv) == "1" {
		t.Skip("this is the child")
	}
	addr, child := rbStartEMFILEChild(t)
	conns := make([]net.Conn, 0, rbEMFILEClients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range rbEMFILEClients {
		c, err := net.DialTimeout("tcp", addr, rbIOTimeout)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	// The gateway closes what it accepts past its limit (it drops its
	// reserved fd to do so): some clients see that close.
	closedByGateway := 0
	eventually(t, "the gateway to close a client it had no fd for", func() bool {
		closedByGateway = 0
		for _, c := range conns {
			if st := rbPeerState(c); st == io.EOF || rbIsReset(st) {
				closedByGateway++
			}
		}
		return closedByGateway > 0
	})
	// Free most fds, then the admin endpoint has room to answer.
	for _, c := range conns[:2*rbEMFILEClients/3] {
		c.Close()
	}
	conns = conns[2*rbEMFILEClients/3:]
	var emfile string
	eventually(t, "/metrics from the exhausted gateway", func() bool {
		v, err := rbMetric(addr, "edgemux_emfile_total")
		emfile = v
		return err == nil
	})
	// Each exhaustion pauses accepting (limits.emfile_pause): a loop that
	// spun on EMFILE would count it millions of times.
	if n, err := strconv.ParseFloat(emfile, 64); err != nil || n < 1 || n > 10000 {
		t.Errorf("edgemux_emfile_total = %q, want > 0 and no sign of a spin", emfile)
	}
	t.Logf("%d clients against a limit of %d fds: %d closed at once by the gateway, edgemux_emfile_total %s",
		rbEMFILEClients, rbEMFILELimit, closedByGateway, emfile)
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	eventually(t, "a private device to connect and publish again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := private.Dial(ctx, addr, "after-emfile", private.ClientOptions{})
		if err != nil {
			return false
		}
		defer c.Close()
		return c.Publish("robust/emfile", []byte("back"), true) == nil
	})
	child.finish(t)
}

type rbEMFILEChild struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	mu     sync.Mutex
	output bytes.Buffer
	done   chan error
}

func (c *rbEMFILEChild) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.output.Write(p)
}

func (c *rbEMFILEChild) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.output.String()
}

// rbStartEMFILEChild re-runs this test binary as the gateway child and
// returns the address it prints.
func rbStartEMFILEChild(t *testing.T) (string, *rbEMFILEChild) {
	t.Helper()
	child := &rbEMFILEChild{done: make(chan error, 1)}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEMFILEChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), rbEMFILEEnv+"=1")
	cmd.Stderr = child
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.cmd, child.stdin = cmd, stdin
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, rbEMFILEMarker); ok {
				addrCh <- a
			}
			fmt.Fprintln(child, line)
		}
		child.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-child.done:
		case <-time.After(rbIOTimeout):
			cmd.Process.Kill()
		}
	})
	select {
	case a := <-addrCh:
		return a, child
	case err := <-child.done:
		t.Fatalf("child exited before listening: %v\n%s", err, child)
	case <-time.After(rbIOTimeout):
		t.Fatalf("child did not start (hang guard)\n%s", child)
	}
	return "", nil
}

// finish ends the child and wants it to have passed.
func (c *rbEMFILEChild) finish(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("gateway child: %v\n%s", err, c)
		}
		c.done <- nil // for the cleanup
	case <-time.After(rbIOTimeout):
		t.Errorf("gateway child did not exit (hang guard)\n%s", c)
	}
}

// rbPanicHandler is the private handler with a fault injected: a session
// panics when it is given a PUB to the topic "boom".
type rbPanicHandler struct {
	inner atomic.Pointer[private.Handler]
}

type rbPanicSession struct{ inner protocols.Session }

func (h *rbPanicHandler) Open(c protocols.Conn) (protocols.Session, error) {
	s, err := h.inner.Load().Open(c)
	if err != nil {
		return nil, err
	}
	return &rbPanicSession{inner: s}, nil
}

func (s *rbPanicSession) Data(in []byte) (int, error) {
	for rest := in; ; {
		f, n, err := private.ParseFrame(rest, 0)
		if err != nil || n == 0 {
			break
		}
		if m, err := private.DecodePub(f.Payload); f.Type == private.TypePub && err == nil && string(m.Topic) == "boom" {
			panic("robust: injected handler fault")
		}
		rest = rest[n:]
	}
	return s.inner.Data(in)
}

func (s *rbPanicSession) Closed(reason error) { s.inner.Closed(reason) }

func (s *rbPanicSession) Notified() error {
	if n, ok := s.inner.(protocols.Notified); ok {
		return n.Notified()
	}
	return nil
}

// TestPanickingHandlerIsContained: a session that panics takes down its
// own connection only. The connection is closed and recorded as a panic,
// the panic is counted, and another connection on the same (only) worker
// keeps working, as do new ones.
func TestPanickingHandlerIsContained(t *testing.T) {
	cfg := rbConfig(t)
	p := cfg.Pools["private"]
	p.Workers = 1
	cfg.Pools["private"] = p
	h := &rbPanicHandler{}
	g, err := New(cfg, Options{Handlers: map[string]protocols.Handler{"private": h}})
	if err != nil {
		t.Fatal(err)
	}
	h.inner.Store(private.New(cfg.Private, g.Bus(), nil))
	rbRunGateway(t, g)
	addr := g.Addr().String()

	bystander := rbDialClient(t, addr, "bystander")
	if err := bystander.Subscribe("robust/bystander"); err != nil {
		t.Fatal(err)
	}
	if err := rbRoundTrip(bystander, "robust/bystander", []byte("before")); err != nil {
		t.Fatal(err)
	}

	victim, err := rbHelloConn(addr, rbAnySource, "victim")
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	if err := rbWrite(victim, rbPubFrame(7, "boom", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	rbExpectOnePanic(t, g, victim, "the panic")

	if err := rbRoundTrip(bystander, "robust/bystander", []byte("after")); err != nil {
		t.Errorf("bystander on the same worker after the panic: %v", err)
	}
	late := rbDialClient(t, addr, "late")
	if err := late.Subscribe("robust/late"); err != nil {
		t.Fatal(err)
	}
	if err := rbRoundTrip(late, "robust/late", []byte("hello")); err != nil {
		t.Errorf("new connection after the panic: %v", err)
	}
	if st := g.Book().Stats(); st.Landings != 1 {
		t.Errorf("quarantine book: %v, want the one panic", st.Reasons)
	}
}

// rbPanicWriter is a device writer (bus.Writer) that panics: a bug in the
// code a private session calls, inside the session's own recover.
type rbPanicWriter struct{}

func (rbPanicWriter) Write(string, []byte, string, func(error)) error {
	panic("robust: injected writer fault")
}

// TestSessionPanicIsAnsweredAndCounted: a panic that the private session
// recovers itself (so that it can answer first) reaches the client as
// ERROR INTERNAL before the close, and the gateway counts and records it
// as it does the panics it recovers: the metric, the quarantine book, the
// close reason. Other connections go on.
func TestSessionPanicIsAnsweredAndCounted(t *testing.T) {
	cfg := rbConfig(t)
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Bus().Claim("robust-test", []string{"robust/device/value"}, rbPanicWriter{}); err != nil {
		t.Fatal(err)
	}
	rbRunGateway(t, g)
	addr := g.Addr().String()
	bystander := rbDialClient(t, addr, "bystander")
	if err := bystander.Subscribe("robust/bystander"); err != nil {
		t.Fatal(err)
	}

	victim, err := rbHelloConn(addr, rbAnySource, "victim")
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	if err := rbWrite(victim, rbPubFrame(7, "robust/device/value", []byte("1"))); err != nil {
		t.Fatal(err)
	}
	f, err := rbReadFrame(victim)
	if err != nil || f.Type != private.TypeError {
		t.Fatalf("victim after the panic: frame %v %x, err %v; want ERROR", f.Type, f.Payload, err)
	}
	if m, err := private.DecodeError(f.Payload); err != nil || m.Code != private.CodeInternal {
		t.Fatalf("ERROR %+v (%v), want INTERNAL", m, err)
	}
	rbExpectOnePanic(t, g, victim, "its ERROR")
	if err := rbRoundTrip(bystander, "robust/bystander", []byte("after")); err != nil {
		t.Errorf("bystander after the panic: %v", err)
	}
}

// rbExpectOnePanic checks the end of a private connection whose session
// panicked, after what the client read so far (after): the connection is
// closed, and the gateway counted and recorded one panic, the close
// reason included.
func rbExpectOnePanic(t *testing.T, g *Gateway, victim net.Conn, after string) {
	t.Helper()
	if f, err := rbReadFrame(victim); err == nil || !(errors.Is(err, io.EOF) || rbIsReset(err)) {
		t.Fatalf("victim after %s: frame %v %x, err %v; want the connection closed", after, f.Type, f.Payload, err)
	}
	eventually(t, "the panic in the quarantine book", func() bool {
		return g.Book().Stats().Reasons[protocols.ReasonPanic] == 1
	})
	m := httpGet(t, g, "/metrics")
	if v := metric(m, "edgemux_handler_panics_total"); v != "1" {
		t.Errorf("edgemux_handler_panics_total = %q, want 1", v)
	}
	if v := metric(m, `edgemux_closed_total{protocol="private",reason="panic"}`); v != "1" {
		t.Errorf(`edgemux_closed_total{reason="panic"} = %q, want 1`, v)
	}
}

// TestOversizeInput: frames and requests larger than their limits get the
// protocol's own answer or a close, and are counted.
func TestOversizeInput(t *testing.T) {
	g := startGateway(t, rbConfig(t), Options{})
	addr := g.Addr().String()
	maxFrame := uint32(g.cfg.Private.MaxFrame)

	for _, tc := range []struct {
		name  string
		hello bool   // say HELLO first
		send  []byte // then this
	}{
		{"PUB over max_frame", true, rbRawHeader(private.TypePub, maxFrame+1)},
		{"HELLO over max_frame", false, rbRawHeader(private.TypeHello, maxFrame+1)},
		{"PUB announcing 16 MiB", true, rbRawHeader(private.TypePub, 16<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := g.Book().Stats().Reasons[protocols.ReasonMalformed]
			var c net.Conn
			var err error
			if tc.hello {
				c, err = rbHelloConn(addr, rbAnySource, "big")
			} else {
				c, err = net.DialTimeout("tcp", addr, rbIOTimeout)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := rbWrite(c, tc.send); err != nil {
				t.Fatal(err)
			}
			f, err := rbReadFrame(c)
			if err != nil {
				t.Fatalf("want an ERROR frame, got %v", err)
			}
			e, err := private.DecodeError(f.Payload)
			if f.Type != private.TypeError || err != nil || e.Code != private.CodeFrameTooLarge {
				t.Fatalf("got %v %x (%v), want ERROR FRAME_TOO_LARGE (4)", f.Type, f.Payload, err)
			}
			if _, err := rbReadFrame(c); !errors.Is(err, io.EOF) && !rbIsReset(err) {
				t.Fatalf("after the ERROR: %v, want the connection closed", err)
			}
			eventually(t, "a malformed record", func() bool {
				return g.Book().Stats().Reasons[protocols.ReasonMalformed] == before+1
			})
		})
	}

	t.Run("admin request with a 64 KiB header line", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", addr, rbIOTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := "GET /healthz HTTP/1.1\r\nHost: edgemux.test\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
		if err := rbWrite(c, []byte(req)); err != nil && !rbIsReset(err) {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(rbIOTimeout))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err == nil:
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("status %s, want 431 or a close", resp.Status)
			}
			t.Logf("answer: %s", resp.Status)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), rbIsReset(err):
			t.Logf("answer: closed (%v)", err)
		default:
			t.Errorf("reading the answer: %v, want 431 or a close", err)
		}
	})
}

// TestReloadNewRouteKeepsLiveConnections: Reload sends HTTP to a backend
// from then on, while a private connection opened before keeps working
// through it.
func TestReloadNewRouteKeepsLiveConnections(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend saw %s %s", r.Method, r.URL.Path)
	}))
	t.Cleanup(backend.Close)
	cfg := rbConfig(t)
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()

	live := rbDialClient(t, addr, "live")
	if err := live.Subscribe("robust/live"); err != nil {
		t.Fatal(err)
	}
	if err := rbRoundTrip(live, "robust/live", []byte("before reload")); err != nil {
		t.Fatal(err)
	}
	if body := httpGet(t, g, "/healthz"); !strings.Contains(body, `"status"`) {
		t.Fatalf("admin before reload: %q", body)
	}

	next := rbConfig(t)
	next.Routes = []config.Route{
		{Match: config.Match{Proto: "private"}, Action: "handle"},
		{Match: config.Match{Proto: "http"}, Action: "forward", Backend: strings.TrimPrefix(backend.URL, "http://")},
		{Match: config.Match{Proto: "*"}, Action: "quarantine"},
	}
	next.Normalize()
	if err := g.Reload(next); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	body, err := rbFetch(addr, "/after-reload")
	if err != nil || body != "backend saw GET /after-reload" {
		t.Fatalf("HTTP after reload: %q, %v; want the backend", body, err)
	}
	if err := rbRoundTrip(live, "robust/live", []byte("after reload")); err != nil {
		t.Errorf("private connection from before the reload: %v", err)
	}
	fresh := rbDialClient(t, addr, "fresh")
	if err := fresh.Subscribe("robust/fresh"); err != nil {
		t.Fatal(err)
	}
	if err := rbRoundTrip(fresh, "robust/fresh", []byte("new")); err != nil {
		t.Errorf("private connection after the reload: %v", err)
	}
}

// TestShutdownClosesClientsAndRunReturns: Shutdown closes connected
// devices (they see the connection end) and connections still being
// classified, stops accepting, and Run returns.
func TestShutdownClosesClientsAndRunReturns(t *testing.T) {
	g, err := New(rbConfig(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := rbRunGateway(t, g)
	addr := g.Addr().String()
	var devices []*private.Client
	for i := range 3 {
		c := rbDialClient(t, addr, fmt.Sprint("device-", i))
		if err := c.Subscribe(fmt.Sprint("robust/shutdown/", i)); err != nil {
			t.Fatal(err)
		}
		devices = append(devices, c)
	}
	silent := dial(t, g) // still sniffing
	eventually(t, "the silent connection in the registry", func() bool { return g.reg.Len() == 4 })

	ctx, cancel := context.WithTimeout(context.Background(), rbIOTimeout)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	for i, c := range devices {
		select {
		case _, ok := <-c.Messages():
			if ok {
				t.Errorf("device %d: a delivery instead of the close", i)
			}
		case <-time.After(rbIOTimeout):
			t.Fatalf("device %d still connected after Shutdown (hang guard)", i)
		}
		if c.Err() == nil {
			t.Errorf("device %d: no end reason", i)
		}
	}
	silent.SetReadDeadline(time.Now().Add(rbIOTimeout))
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !rbIsReset(err) {
		t.Errorf("silent connection after Shutdown: %v, want closed", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(rbIOTimeout):
		t.Fatal("Run did not return after Shutdown (hang guard)")
	}
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Errorf("a new connection was accepted after Shutdown")
	}
}
