package main

// kcp-go, as its README sets it up: a listener whose accepted sessions
// each get a goroutine reading messages (message mode: one Write is one
// Read), and clients that Write. Two settings: fast (NoDelay(1, 10, 2, 1),
// the "fastest" mode of kcp-go's README and kcptun's fast3) and kcp-go's
// defaults (NoDelay(0, 100, 0, 0)), on both ends.
//
// With one socket per client session, the server is kcp-go's own
// ServeConn on a *net.UDPConn and the clients DialWithOptions: its
// native paths, batched reads and writes included. When sessions share client sockets
// (the idle row: 100,000 sessions cannot have a socket each under a
// 20,000-fd limit), kcp-go's listener, which finds sessions by the
// peer's address, needs them told apart by their conversation id too:
// convConn gives each (address, conv) pair an address of its own, and on
// the client side kcpMux hands each session its packets through kcp-go's
// PacketPusher, so no session needs a socket or a read goroutine.

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	kcp "github.com/xtaci/kcp-go/v5"
)

// kcpMode is how both ends set their sessions.
type kcpMode struct{ nodelay, interval, resend, nc int }

var (
	kcpFast    = kcpMode{1, 10, 2, 1}
	kcpDefault = kcpMode{0, 100, 0, 0}
)

func (m kcpMode) apply(s *kcp.UDPSession) { s.SetNoDelay(m.nodelay, m.interval, m.resend, m.nc) }

// kcpServer is a listener and its sessions' goroutines.
type kcpServer struct {
	l    *kcp.Listener
	conn *net.UDPConn
	wg   sync.WaitGroup
	mu   sync.Mutex
	live map[*kcp.UDPSession]bool
}

func (s *kcpServer) addr() netip.AddrPort { return s.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (s *kcpServer) close() {
	s.l.Close()
	s.mu.Lock()
	for sess := range s.live {
		sess.Close()
	}
	s.mu.Unlock()
	s.conn.Close()
	s.wg.Wait()
}

func serveKCP(mode kcpMode) func(*serverApp, bool) (server, error) {
	return func(app *serverApp, shared bool) (server, error) {
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, err
		}
		conn.SetReadBuffer(4 << 20)
		conn.SetWriteBuffer(4 << 20)
		var pc net.PacketConn = conn
		if shared {
			pc = newConvConn(conn)
		}
		l, err := kcp.ServeConn(nil, 0, 0, pc)
		if err != nil {
			conn.Close()
			return nil, err
		}
		s := &kcpServer{l: l, conn: conn, live: map[*kcp.UDPSession]bool{}}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				sess, err := l.AcceptKCP()
				if err != nil {
					return
				}
				mode.apply(sess)
				s.mu.Lock()
				s.live[sess] = true
				s.mu.Unlock()
				app.opened.Add(1)
				s.wg.Add(1)
				go s.serveSession(app, sess)
			}
		}()
		return s, nil
	}
}

// serveSession reads one session's messages until it closes.
func (s *kcpServer) serveSession(app *serverApp, sess *kcp.UDPSession) {
	defer s.wg.Done()
	defer app.closed.Add(1)
	buf := make([]byte, 2048)
	for {
		n, err := sess.Read(buf)
		if err != nil {
			s.mu.Lock()
			delete(s.live, sess)
			s.mu.Unlock()
			sess.Close()
			return
		}
		if app.handle(buf[:n]) {
			sess.Write(buf[:n])
		}
	}
}

func dialKCP(mode kcpMode) func(context.Context, dialConfig) (clients, error) {
	return func(ctx context.Context, cfg dialConfig) (clients, error) {
		cs := &kcpClients{sessions: make([]*kcp.UDPSession, cfg.n)}
		raddr := net.UDPAddrFromAddrPort(cfg.server)
		if cfg.sockets > 0 {
			for range min(cfg.sockets, cfg.n) {
				m, err := newKCPMux(raddr)
				if err != nil {
					cs.close()
					return nil, err
				}
				cs.muxes = append(cs.muxes, m)
			}
		}
		for i := range cfg.n {
			var sess *kcp.UDPSession
			var err error
			if cs.muxes == nil {
				sess, err = kcp.DialWithOptions(cfg.server.String(), nil, 0, 0)
			} else {
				// Conversation ids unique across the run, so the server's
				// convConn keys never collide.
				sess, err = kcp.NewConn4(uint32(i+1), raddr, nil, 0, 0, false, cs.muxes[i%len(cs.muxes)].session(uint32(i+1)))
			}
			if err != nil {
				cs.close()
				return nil, err
			}
			mode.apply(sess)
			cs.sessions[i] = sess
			if cfg.onReply != nil {
				cs.wg.Add(1)
				go cs.readReplies(i, sess, cfg.onReply)
			}
		}
		return cs, nil
	}
}

type kcpClients struct {
	sessions []*kcp.UDPSession
	muxes    []*kcpMux
	wg       sync.WaitGroup
}

func (cs *kcpClients) send(i int, msg []byte) error {
	_, err := cs.sessions[i].Write(msg)
	return err
}

// established: kcp has no handshake; a session exists once made.
func (cs *kcpClients) established() int { return len(cs.sessions) }

func (cs *kcpClients) readReplies(i int, sess *kcp.UDPSession, onReply func(int, []byte)) {
	defer cs.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, err := sess.Read(buf)
		if err != nil {
			return
		}
		onReply(i, buf[:n])
	}
}

func (cs *kcpClients) close() {
	for _, s := range cs.sessions {
		if s != nil {
			s.Close()
		}
	}
	for _, m := range cs.muxes {
		m.conn.Close()
	}
	cs.wg.Wait()
}

// convConn is the server's socket as kcp-go's listener sees it when
// clients share sockets: every (source address, conversation id) pair is
// an address of its own. It pushes packets (kcp.PacketPusher) from one
// read goroutine. It does not embed the *net.UDPConn: kcp-go would find
// its ReadMsgUDP and write batches to the socket itself, with addresses
// the socket does not know.
type convConn struct {
	udp   *net.UDPConn
	mu    sync.Mutex
	addrs map[convKey]*convAddr
	recv  atomic.Pointer[func([]byte, net.Addr, error)]
	start sync.Once
}

type convKey struct {
	ap   netip.AddrPort
	conv uint32
}

// convAddr is one session's address; kcp-go keys its sessions by String.
type convAddr struct {
	ap  netip.AddrPort
	str string
}

func (a *convAddr) Network() string { return "udp" }
func (a *convAddr) String() string  { return a.str }

func newConvConn(conn *net.UDPConn) *convConn {
	return &convConn{udp: conn, addrs: map[convKey]*convAddr{}}
}

func (c *convConn) SetPacketReceiver(fn func([]byte, net.Addr, error)) {
	if fn == nil {
		c.recv.Store(nil)
		return
	}
	c.recv.Store(&fn)
	c.start.Do(func() { go c.readLoop() })
}

func (c *convConn) readLoop() {
	buf := make([]byte, 65536)
	for {
		n, ap, err := c.udp.ReadFromUDPAddrPort(buf)
		fn := c.recv.Load()
		if fn == nil {
			return
		}
		if err != nil {
			(*fn)(nil, nil, err)
			return
		}
		if n < 4 {
			continue
		}
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		(*fn)(buf[:n], c.addrOf(ap, binary.LittleEndian.Uint32(buf)), nil)
	}
}

func (c *convConn) addrOf(ap netip.AddrPort, conv uint32) *convAddr {
	k := convKey{ap, conv}
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.addrs[k]
	if a == nil {
		a = &convAddr{ap: ap, str: ap.String() + "#" + strconv.FormatUint(uint64(conv), 10)}
		c.addrs[k] = a
	}
	return a
}

// WriteTo sends to the session's real address.
func (c *convConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if a, ok := addr.(*convAddr); ok {
		return c.udp.WriteToUDPAddrPort(b, a.ap)
	}
	return c.udp.WriteTo(b, addr)
}

// ReadFrom is not used: kcp-go takes the pushed packets.
func (c *convConn) ReadFrom([]byte) (int, net.Addr, error) { return 0, nil, net.ErrClosed }

func (c *convConn) Close() error                       { return c.udp.Close() }
func (c *convConn) LocalAddr() net.Addr                { return c.udp.LocalAddr() }
func (c *convConn) SetDeadline(t time.Time) error      { return c.udp.SetDeadline(t) }
func (c *convConn) SetReadDeadline(t time.Time) error  { return c.udp.SetReadDeadline(t) }
func (c *convConn) SetWriteDeadline(t time.Time) error { return c.udp.SetWriteDeadline(t) }

// kcpMux is one client socket shared by many kcp sessions: one read
// goroutine hands each packet to the session its conversation id names.
type kcpMux struct {
	conn  *net.UDPConn
	raddr *net.UDPAddr
	mu    sync.RWMutex
	recv  map[uint32]func([]byte, net.Addr, error)
}

func newKCPMux(raddr *net.UDPAddr) (*kcpMux, error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	conn.SetReadBuffer(4 << 20)
	conn.SetWriteBuffer(4 << 20)
	m := &kcpMux{conn: conn, raddr: raddr, recv: map[uint32]func([]byte, net.Addr, error){}}
	go m.readLoop()
	return m, nil
}

func (m *kcpMux) readLoop() {
	buf := make([]byte, 65536)
	for {
		n, err := m.conn.Read(buf)
		if err != nil {
			return
		}
		if n < 4 {
			continue
		}
		m.mu.RLock()
		fn := m.recv[binary.LittleEndian.Uint32(buf)]
		m.mu.RUnlock()
		if fn != nil {
			fn(buf[:n], m.raddr, nil)
		}
	}
}

// session is the net.PacketConn one kcp session uses.
func (m *kcpMux) session(conv uint32) *muxSession { return &muxSession{m: m, conv: conv} }

type muxSession struct {
	net.PacketConn // nil: only the methods below are used
	m              *kcpMux
	conv           uint32
}

func (s *muxSession) SetPacketReceiver(fn func([]byte, net.Addr, error)) {
	s.m.mu.Lock()
	if fn == nil {
		delete(s.m.recv, s.conv)
	} else {
		s.m.recv[s.conv] = fn
	}
	s.m.mu.Unlock()
}

func (s *muxSession) WriteTo(b []byte, _ net.Addr) (int, error) {
	return s.m.conn.WriteTo(b, s.m.raddr)
}
func (s *muxSession) LocalAddr() net.Addr { return s.m.conn.LocalAddr() }
func (s *muxSession) Close() error        { return nil }
