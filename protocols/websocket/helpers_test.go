package websocket

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	gorilla "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// safetyNet bounds every wait so a broken test fails instead of hanging;
// it is never a performance assertion.
const safetyNet = 30 * time.Second

// fakeConn is a protocols.Conn for one session. With nc set, output goes
// to the socket (or, while stalled, stays buffered as a peer that does not
// read would leave it); without, it is collected in out.
type fakeConn struct {
	peer          netip.AddrPort
	nc            net.Conn
	out           []byte
	held          []byte // output the "socket" has not taken: Buffered
	shared        int    // writes through WriteShared
	stall         bool
	highWater     int
	closed        bool
	reason        error
	timer         time.Duration
	notify        chan struct{}
	panicOnNotify bool
	panicOnTimer  bool
	sess          protocols.Session
	dropped       int // sum of CountDropped
}

func newFakeConn() *fakeConn {
	return &fakeConn{
		peer:      netip.MustParseAddrPort("127.0.0.1:40000"),
		highWater: 1 << 30,
		notify:    make(chan struct{}, 1),
	}
}

func (c *fakeConn) ID() uint64               { return 1 }
func (c *fakeConn) Peer() netip.AddrPort     { return c.peer }
func (c *fakeConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (c *fakeConn) Buffered() int            { return len(c.held) }
func (c *fakeConn) SetTimer(d time.Duration) {
	if c.panicOnTimer {
		panic("timer exploded")
	}
	c.timer = d
}
func (c *fakeConn) CountDropped(n int) { c.dropped += n }
func (c *fakeConn) Notify() {
	if c.panicOnNotify {
		panic("notify exploded")
	}
	trySignal(c.notify)
}
func trySignal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Write is the gateway's: a write into an empty buffer always goes ahead,
// one that would take a non-empty buffer past highWater is refused.
func (c *fakeConn) Write(p []byte) error {
	switch {
	case c.closed:
		return protocols.ErrClosed
	case len(c.held) > 0 && len(c.held)+len(p) > c.highWater:
		return protocols.ErrBackpressure
	case c.stall:
		c.held = append(c.held, p...)
	case c.nc != nil:
		if _, err := c.nc.Write(p); err != nil {
			c.Close(err)
			return err
		}
	default:
		c.out = append(c.out, p...)
	}
	return nil
}

// WriteShared is the gateway's protocols.SharedWriter, which sessions use
// for output with shared delivery texts; the fake checks that the frames
// are p, one after the other, and keeps copies.
func (c *fakeConn) WriteShared(p []byte, frames [][]byte) error {
	c.shared++
	rest := p
	for _, f := range frames {
		if len(f) > len(rest) || !bytes.Equal(f, rest[:len(f)]) {
			panic("WriteShared: the frames are not the bytes")
		}
		rest = rest[len(f):]
	}
	if len(rest) > 0 {
		panic("WriteShared: the frames are not all the bytes")
	}
	return c.Write(p)
}

func (c *fakeConn) Close(reason error) {
	if c.closed {
		return
	}
	c.closed, c.reason = true, reason
	if c.nc != nil {
		c.nc.Close()
	}
	if c.sess != nil {
		c.sess.Closed(reason)
	}
}

// unstall sends what a stalled peer left buffered.
func (c *fakeConn) unstall() {
	c.stall = false
	held := c.held
	c.held = nil
	if len(held) > 0 {
		_ = c.Write(held)
	}
}

// feeder keeps unconsumed input and calls Data like the gateway's worker.
type feeder struct {
	conn    *fakeConn
	sess    protocols.Session
	pending []byte
}

func (f *feeder) feed(b []byte) {
	f.pending = append(f.pending, b...)
	for len(f.pending) > 0 && !f.conn.closed {
		n, err := f.sess.Data(f.pending)
		if err != nil {
			f.conn.Close(err)
			return
		}
		if n <= 0 {
			break
		}
		f.pending = f.pending[n:]
	}
	if len(f.pending) == 0 {
		f.pending = nil
	}
}

func (f *feeder) notified() {
	if f.conn.closed {
		return
	}
	if err := f.sess.(protocols.Notified).Notified(); err != nil {
		f.conn.Close(err)
	}
}

// writable is the worker's call once buffered output is written.
func (f *feeder) writable() {
	if f.conn.closed {
		return
	}
	if err := f.sess.(protocols.Writable).Writable(); err != nil {
		f.conn.Close(err)
	}
}

func (f *feeder) timer() {
	if f.conn.closed {
		return
	}
	if err := f.sess.(protocols.Timed).Timer(); err != nil {
		f.conn.Close(err)
	}
}

// chunker picks read sizes: how the server side splits the byte stream.
type chunker struct {
	name string
	next func() int
}

var chunkers = []chunker{
	{"whole", func() int { return 64 << 10 }},
	{"1-byte", func() int { return 1 }},
	{"random", func() int { return 1 + rand.IntN(40) }},
}

// server is a loopback listener whose connections are served by one
// handler, each by a worker goroutine of its own that owns the session.
type server struct {
	t     *testing.T
	h     *Handler
	bus   *bus.Bus
	ln    net.Listener
	chunk func() int
	mu    sync.Mutex
	pumps []*pump
	newc  chan *pump
	wg    sync.WaitGroup
}

// pump is the worker of one connection.
type pump struct {
	nc    net.Conn
	f     feeder
	calls chan func()
	done  chan struct{}
}

func newServer(t *testing.T, cfg config.WebSocket, b *bus.Bus, chunk func() int) *server {
	t.Helper()
	if b == nil {
		b = bus.New(bus.Options{})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, h: New(cfg, b, nil), bus: b, ln: ln, chunk: chunk, newc: make(chan *pump, 64)}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
		for _, p := range s.pumps {
			p.nc.Close()
			<-p.done
		}
	})
	return s
}

func (s *server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		c := newFakeConn()
		c.nc = nc
		sess, err := s.h.Open(c)
		if err != nil {
			nc.Close()
			continue
		}
		c.sess = sess
		p := &pump{nc: nc, f: feeder{conn: c, sess: sess}, calls: make(chan func()), done: make(chan struct{})}
		s.mu.Lock()
		s.pumps = append(s.pumps, p)
		s.mu.Unlock()
		go p.run(nc, s.chunk)
		s.newc <- p
	}
}

// run is the worker loop: input chunks, notifications and injected calls,
// all on this one goroutine.
func (p *pump) run(nc net.Conn, chunk func() int) {
	defer close(p.done)
	chunks := make(chan []byte)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, chunk())
			n, err := nc.Read(buf)
			if n > 0 {
				chunks <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case b, ok := <-chunks:
			if !ok { // do() runs calls itself from now on
				p.f.conn.Close(protocols.ErrPeerClosed)
				return
			}
			p.f.feed(b)
		case <-p.f.conn.notify:
			p.f.notified()
		case fn := <-p.calls:
			fn()
		}
	}
}

// do runs fn on the connection's worker and waits for it.
func (p *pump) do(fn func()) {
	done := make(chan struct{})
	select {
	case p.calls <- func() { fn(); close(done) }:
		<-done
	case <-p.done:
		fn() // the worker is gone; nothing races with us
	}
}

// next returns the pump of the next accepted connection.
func (s *server) next() *pump {
	s.t.Helper()
	select {
	case p := <-s.newc:
		return p
	case <-time.After(safetyNet):
		s.t.Fatal("no connection accepted")
		return nil
	}
}

func (s *server) url(path string) string { return "ws://" + s.ln.Addr().String() + path }

// dial connects a real gorilla client offering edgemux.v1.
func (s *server) dial(header http.Header) (*gorilla.Conn, *pump) {
	s.t.Helper()
	return s.dialWith(&gorilla.Dialer{Subprotocols: []string{"edgemux.v1"}, HandshakeTimeout: safetyNet}, "/ws", header)
}

func (s *server) dialWith(d *gorilla.Dialer, path string, header http.Header) (*gorilla.Conn, *pump) {
	s.t.Helper()
	ws, resp, err := d.Dial(s.url(path), header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		s.t.Fatalf("dial: %v (status %d)", err, status)
	}
	s.t.Cleanup(func() { ws.Close() })
	return ws, s.next()
}

// waitClosed waits until the worker closed the connection and returns
// the reason.
func (p *pump) waitClosed(t *testing.T) error {
	t.Helper()
	deadline := time.Now().Add(safetyNet)
	for time.Now().Before(deadline) {
		var closed bool
		var reason error
		p.do(func() { closed, reason = p.f.conn.closed, p.f.conn.reason })
		if closed {
			return reason
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("connection not closed")
	return nil
}

// readJSON reads the next text message, with a safety deadline.
func readJSON(t *testing.T, ws *gorilla.Conn) string {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(safetyNet))
	typ, p, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != gorilla.TextMessage {
		t.Fatalf("message type %d, want text", typ)
	}
	return string(p)
}

func writeJSON(t *testing.T, ws *gorilla.Conn, msg string) {
	t.Helper()
	if err := ws.WriteMessage(gorilla.TextMessage, []byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// sync sends {"op":"ping"} and reads up to the pong: everything sent
// before it has been handled by the server.
func syncPing(t *testing.T, ws *gorilla.Conn) []string {
	t.Helper()
	writeJSON(t, ws, `{"op":"ping"}`)
	var before []string
	for {
		m := readJSON(t, ws)
		if m == `{"op":"pong"}` {
			return before
		}
		before = append(before, m)
	}
}

// readClose reads until the server's close frame and returns its code.
func readClose(t *testing.T, ws *gorilla.Conn) (int, string) {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(safetyNet))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *gorilla.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Text
		}
		t.Fatalf("read ended with %v, want a close frame", err)
	}
}

// clientFrame builds a masked client frame by hand.
func clientFrame(b0 byte, payload []byte) []byte {
	return clientFrameLen(b0, payload, uint64(len(payload)))
}

// clientFrameLen builds a masked frame whose header claims length.
func clientFrameLen(b0 byte, payload []byte, length uint64) []byte {
	f := []byte{b0}
	switch {
	case length < 126:
		f = append(f, 0x80|byte(length))
	case length <= 0xffff:
		f = append(f, 0x80|126)
		f = binary.BigEndian.AppendUint16(f, uint16(length))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, length)
	}
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	f = append(f, key[:]...)
	start := len(f)
	f = append(f, payload...)
	unmask(key, f[start:])
	return f
}

// Frame first bytes: FIN plus opcode.
const (
	finText   = 0x80 | byte(OpText)
	finBinary = 0x80 | byte(OpBinary)
	finCont   = 0x80 | byte(OpContinuation)
	finPing   = 0x80 | byte(OpPing)
	finPong   = 0x80 | byte(OpPong)
	finClose  = 0x80 | byte(OpClose)
)

// upgradeRequest is a browser-like handshake for path.
func upgradeRequest(path string, extra ...string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:5020\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: edgemux.v1\r\n" + strings.Join(extra, "") + "\r\n"
}

// offline is a session driven without a socket: the test writes client
// bytes and reads what the session staged.
type offline struct {
	h *Handler
	feeder
}

// newOffline opens a session on a fake conn and completes the handshake,
// with extra request header lines if given.
func newOffline(t testing.TB, h *Handler, extra ...string) *offline {
	t.Helper()
	c := newFakeConn()
	sess, err := h.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	c.sess = sess
	o := &offline{h: h, feeder: feeder{conn: c, sess: sess}}
	o.feed([]byte(upgradeRequest("/ws", extra...)))
	if c.closed || !strings.HasPrefix(string(c.out), "HTTP/1.1 101 ") {
		t.Fatalf("handshake failed: closed=%v reason=%v out=%q", c.closed, c.reason, c.out)
	}
	c.out = c.out[:0]
	return o
}

// serverFrame is one frame the session sent.
type serverFrame struct {
	op      Opcode
	payload string
}

// frames parses and clears what the session wrote (server frames are
// unmasked and never compressed here).
func (o *offline) frames(t testing.TB) []serverFrame {
	t.Helper()
	var out []serverFrame
	p := o.conn.out
	for len(p) > 0 {
		h, n, err := ParseHeader(p)
		if err != nil || n == 0 || h.Masked || uint64(len(p)-n) < h.Length {
			t.Fatalf("bad server output %q", p)
		}
		out = append(out, serverFrame{h.Opcode, string(p[n : n+int(h.Length)])})
		p = p[n+int(h.Length):]
	}
	o.conn.out = o.conn.out[:0]
	return out
}

// send feeds one JSON text message as a masked frame.
func (o *offline) send(msg string) { o.feed(clientFrame(finText, []byte(msg))) }

// dialRaw opens a plain TCP connection to the server.
func dialRaw(s *server) (net.Conn, error) {
	return net.DialTimeout("tcp", s.ln.Addr().String(), safetyNet)
}

// readLine reads the first line the server answers.
func readLine(t *testing.T, nc net.Conn) string {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(safetyNet))
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return strings.TrimSpace(line)
}
