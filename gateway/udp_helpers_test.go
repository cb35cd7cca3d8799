package gateway

// What the datagram path's tests share: test datagrams that carry a
// session id, a sequence number and a body derived from both (so a
// corrupted, truncated or misdelivered one is caught), a datagram handler
// that checks and counts what each worker gets and can echo it, and UDP
// clients.

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/sniff"
)

// dgHeader is the test datagram's header: the RUDP magic (so the loops
// classify it as the reliable UDP core's), a session id and a sequence
// number; the body follows.
const dgHeader = sniff.RUDPHeaderLen

// dgFrame writes a test datagram of size bytes (at least dgHeader) into
// buf and returns it.
func dgFrame(buf []byte, session uint64, seq uint32, size int) []byte {
	b := buf[:size]
	b[0], b[1] = sniff.RUDPMagic0, sniff.RUDPMagic1
	binary.BigEndian.PutUint64(b[2:], session)
	binary.BigEndian.PutUint32(b[10:], seq)
	binary.BigEndian.PutUint16(b[14:], uint16(size))
	for i := dgHeader; i < size; i++ {
		b[i] = byte(session) ^ byte(seq) ^ byte(i*7)
	}
	return b
}

// dgParse checks a test datagram whole and returns its session and
// sequence number.
func dgParse(d []byte) (session uint64, seq uint32, err error) {
	if len(d) < dgHeader || d[0] != sniff.RUDPMagic0 || d[1] != sniff.RUDPMagic1 {
		return 0, 0, fmt.Errorf("not a test datagram: % x", d[:min(len(d), 16)])
	}
	session, seq = binary.BigEndian.Uint64(d[2:]), binary.BigEndian.Uint32(d[10:])
	if n := int(binary.BigEndian.Uint16(d[14:])); n != len(d) {
		return session, seq, fmt.Errorf("session %d seq %d: %d bytes, header says %d", session, seq, len(d), n)
	}
	for i := dgHeader; i < len(d); i++ {
		if d[i] != byte(session)^byte(seq)^byte(i*7) {
			return session, seq, fmt.Errorf("session %d seq %d: byte %d corrupted", session, seq, i)
		}
	}
	return session, seq, nil
}

// dgSession is the session a test datagram names, for Route; 0 when it
// names none.
func dgSession(d []byte) uint64 {
	if len(d) < 10 {
		return 0
	}
	return binary.BigEndian.Uint64(d[2:])
}

// dgHandler is the test's protocols.DatagramHandler: Route keys on the
// session id, so every datagram of a session reaches one worker whatever
// socket it came from; each worker checks what it is given.
type dgHandler struct {
	echo   bool          // send every datagram back to its peer
	inline bool          // the loops run the workers: Route is not asked
	hold   chan struct{} // when not nil, the first Datagrams call waits for it to close
	held   chan struct{} // closed when that call is waiting
	once   sync.Once
	// Sessions whose datagrams make Route or Datagrams panic; 0: none.
	panicRoute, panicData uint64
	// idle, when not nil, makes the workers protocols.DatagramIdlers
	// that say what it holds, until they are given a datagram of
	// busySession (not 0): busy from then on, as data makes rudp's.
	idle        *atomic.Bool
	busySession uint64

	mu      sync.Mutex
	workers []*dgWorker // in order of Worker calls
}

func (h *dgHandler) Route(_ netip.AddrPort, d []byte, workers int) int {
	s := dgSession(d)
	if s != 0 && s == h.panicRoute {
		panic("test: Route panics")
	}
	return int(s % uint64(workers))
}

func (h *dgHandler) Worker(index, workers int, out protocols.DatagramOut) protocols.DatagramWorker {
	w := &dgWorker{h: h, index: index, workers: workers, out: out,
		sessions: map[uint64]int{}, last: map[netip.AddrPort]uint32{}}
	h.mu.Lock()
	h.workers = append(h.workers, w)
	h.mu.Unlock()
	if h.idle != nil {
		return dgIdler{w}
	}
	return w
}

// dgIdler is a dgWorker that says whether it is idle as its handler's
// idle flag does, and busy once it saw the handler's busySession.
type dgIdler struct{ *dgWorker }

func (w dgIdler) Idle(time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.h.busySession; s != 0 && w.sessions[s] > 0 {
		return false
	}
	return w.h.idle.Load()
}

// dgWorker is one worker's state; the test reads it under mu while the
// worker writes it.
type dgWorker struct {
	h       *dgHandler
	index   int
	workers int
	out     protocols.DatagramOut

	mu       sync.Mutex
	n        int                       // datagrams handled
	calls    int                       // Datagrams calls (batches)
	sessions map[uint64]int            // datagrams by session
	last     map[netip.AddrPort]uint32 // last sequence number by peer
	sizes    []int                     // sizes of the first datagrams, for the truncation test
	problems []string
	ticks    int
	closes   int
}

func (w *dgWorker) Datagrams(batch []protocols.Datagram, now time.Time) {
	if w.h.hold != nil {
		w.h.once.Do(func() {
			close(w.h.held)
			<-w.h.hold
		})
	}
	for _, d := range batch {
		if s := dgSession(d.Data); s != 0 && s == w.h.panicData {
			panic("test: Datagrams panics")
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.closes > 0 {
		w.problem("Datagrams after Close")
	}
	for _, d := range batch {
		session, seq, err := dgParse(d.Data)
		if err != nil {
			w.problem(err.Error())
			continue
		}
		if !w.h.inline && int(session%uint64(w.workers)) != w.index {
			w.problem(fmt.Sprintf("session %d on worker %d, Route says %d", session, w.index, session%uint64(w.workers)))
		}
		if last, ok := w.last[d.Peer]; ok && seq <= last {
			w.problem(fmt.Sprintf("peer %v: seq %d after %d", d.Peer, seq, last))
		}
		w.last[d.Peer] = seq
		w.sessions[session]++
		w.n++
		if len(w.sizes) < 16 {
			w.sizes = append(w.sizes, len(d.Data))
		}
		if w.h.echo {
			if err := w.out.Send(d.Peer, d.Data); err != nil {
				w.problem("Send: " + err.Error())
			}
		}
	}
}

func (w *dgWorker) problem(s string) {
	if len(w.problems) < 20 {
		w.problems = append(w.problems, s)
	}
}

func (w *dgWorker) Tick(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closes > 0 {
		w.problem("Tick after Close")
	}
	w.ticks++
	return 0
}

func (w *dgWorker) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closes++
}

// dgSeen sums what the workers saw.
type dgSeen struct {
	handled  int
	calls    int         // Datagrams calls
	perIndex map[int]int // by the workers' index
	sessions map[uint64]map[int]bool
	problems []string
	workers  int // Worker calls
	ticks    int // Tick calls
	closes   []int
}

func (h *dgHandler) seen() dgSeen {
	h.mu.Lock()
	workers := append([]*dgWorker(nil), h.workers...)
	h.mu.Unlock()
	s := dgSeen{perIndex: map[int]int{}, sessions: map[uint64]map[int]bool{}, workers: len(workers)}
	for _, w := range workers {
		w.mu.Lock()
		s.handled += w.n
		s.calls += w.calls
		s.perIndex[w.index] += w.n
		for id := range w.sessions {
			if s.sessions[id] == nil {
				s.sessions[id] = map[int]bool{}
			}
			s.sessions[id][w.index] = true
		}
		s.problems = append(s.problems, w.problems...)
		s.closes = append(s.closes, w.closes)
		s.ticks += w.ticks
		w.mu.Unlock()
	}
	return s
}

// dgConfig is the test configuration with a pool "rudp" of workers
// workers that the reliable-UDP class is routed to.
func dgConfig(t testing.TB, policy string, workers int) config.Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.Dispatch.Policy = policy
	cfg.Pools["rudp"] = config.Pool{Workers: workers}
	cfg.UDP.Routes = map[string]string{"rudp": "rudp"}
	return cfg
}

// dgStart runs a gateway with h serving the reliable-UDP class.
func dgStart(t *testing.T, cfg config.Config, h *dgHandler) *Gateway {
	t.Helper()
	h.inline = cfg.Dispatch.Policy == "inline"
	return startGateway(t, cfg, Options{DatagramHandlers: map[string]protocols.DatagramHandler{"rudp": h}})
}

// dgClient is a UDP socket of the test's talking to the gateway.
func dgClient(t *testing.T, g *Gateway) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(g.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(4 << 20)
	t.Cleanup(func() { c.Close() })
	return c
}

// udpCounts are the gateway's datagram counters and the kernel's drops
// on its sockets.
type udpCounts struct {
	received, dropped, kernel uint64
	drops                     [numDrops]uint64
}

func countsOf(g *Gateway) udpCounts {
	var c udpCounts
	for i := range numClasses {
		c.received += g.udpStats.received[i].Load()
	}
	for i := range numDrops {
		c.drops[i] = g.udpStats.drops[i].Load()
		if i < dropSendFull {
			c.dropped += c.drops[i]
		}
	}
	for _, u := range g.udp {
		n, _ := u.kernelDrops()
		c.kernel += uint64(n)
	}
	return c
}

// metricSum adds up every series of a metric in a /metrics body.
func metricSum(t *testing.T, body, name string) float64 {
	t.Helper()
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}
