package main

// quic-go: one bidirectional stream per connection carries the messages,
// each prefixed by its length (u16), so the telemetry is reliable and in
// order as on the other stacks. Every client socket is a quic.Transport,
// which demultiplexes its connections by connection id, so many sessions
// share one socket when asked. TLS 1.3 with a self-signed certificate made
// at start (the clients skip verifying it: loopback, a benchmark).
// Keepalives every 10 s and a 30 s idle timeout, as rudp's defaults.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

const quicALPN = "udpcompare"

func quicConfig() *quic.Config {
	return &quic.Config{KeepAlivePeriod: 10 * time.Second, MaxIdleTimeout: 30 * time.Second}
}

// selfSigned is a throwaway ECDSA P-256 certificate for 127.0.0.1.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

type quicServer struct {
	tr   *quic.Transport
	l    *quic.Listener
	conn *net.UDPConn
	wg   sync.WaitGroup
}

func (s *quicServer) addr() netip.AddrPort { return s.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (s *quicServer) close() {
	s.l.Close()
	s.tr.Close()
	s.wg.Wait()
}

func serveQUIC(app *serverApp, _ bool) (server, error) {
	cert, err := selfSigned()
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	conn.SetReadBuffer(4 << 20)
	conn.SetWriteBuffer(4 << 20)
	tr := &quic.Transport{Conn: conn}
	l, err := tr.Listen(&tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{quicALPN}}, quicConfig())
	if err != nil {
		conn.Close()
		return nil, err
	}
	s := &quicServer{tr: tr, l: l, conn: conn}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept(context.Background())
			if err != nil {
				return
			}
			app.opened.Add(1)
			s.wg.Add(1)
			go s.serveConn(app, c)
		}
	}()
	return s, nil
}

// serveConn reads the connection's stream until it ends.
func (s *quicServer) serveConn(app *serverApp, c *quic.Conn) {
	defer s.wg.Done()
	defer app.closed.Add(1)
	defer c.CloseWithError(0, "")
	st, err := c.AcceptStream(context.Background())
	if err != nil {
		return
	}
	buf := make([]byte, 2+msgSize)
	for {
		m, err := readFramed(st, buf)
		if err != nil {
			return
		}
		if app.handle(m) {
			if _, err := st.Write(buf[:2+len(m)]); err != nil {
				return
			}
		}
	}
}

// readFramed reads one length-prefixed message into buf (which it may
// outgrow) and returns it; buf[:2] keeps the prefix.
func readFramed(r io.Reader, buf []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, buf[:2]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(buf))
	if 2+n > len(buf) {
		return nil, io.ErrShortBuffer
	}
	_, err := io.ReadFull(r, buf[2:2+n])
	return buf[2 : 2+n], err
}

// quicDials is how many dials run at once.
const quicDials = 32

func dialQUIC(ctx context.Context, cfg dialConfig) (clients, error) {
	sockets := cfg.sockets
	if sockets <= 0 || sockets > cfg.n {
		sockets = cfg.n
	}
	cs := &quicClients{conns: make([]*quic.Conn, cfg.n), streams: make([]*quic.Stream, cfg.n), bufs: make([][]byte, cfg.n)}
	for range sockets {
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			cs.close()
			return nil, err
		}
		conn.SetReadBuffer(4 << 20)
		conn.SetWriteBuffer(4 << 20)
		cs.trs = append(cs.trs, &quic.Transport{Conn: conn})
	}
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{quicALPN}}
	next := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range min(quicDials, cfg.n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := cs.dialOne(ctx, i, cs.trs[i%sockets], cfg, tlsConf); err != nil {
					errOnce.Do(func() { firstErr = err })
				}
			}
		}()
	}
	for i := range cfg.n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil && cs.established() == 0 {
		cs.close()
		return nil, firstErr
	}
	return cs, nil
}

func (cs *quicClients) dialOne(ctx context.Context, i int, tr *quic.Transport, cfg dialConfig, tlsConf *tls.Config) error {
	c, err := tr.Dial(ctx, net.UDPAddrFromAddrPort(cfg.server), tlsConf, quicConfig())
	if err != nil {
		return err
	}
	st, err := c.OpenStream()
	if err != nil {
		c.CloseWithError(0, "")
		return err
	}
	cs.mu.Lock()
	cs.conns[i], cs.streams[i], cs.bufs[i] = c, st, make([]byte, 2+msgSize)
	cs.up++
	cs.mu.Unlock()
	if cfg.onReply != nil {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			buf := make([]byte, 2+msgSize)
			for {
				m, err := readFramed(st, buf)
				if err != nil {
					return
				}
				cfg.onReply(i, m)
			}
		}()
	}
	return nil
}

type quicClients struct {
	trs     []*quic.Transport
	mu      sync.Mutex
	conns   []*quic.Conn
	streams []*quic.Stream
	bufs    [][]byte // per session: the framed message being written
	up      int
	wg      sync.WaitGroup
}

func (cs *quicClients) send(i int, msg []byte) error {
	st, buf := cs.streams[i], cs.bufs[i]
	if st == nil {
		return net.ErrClosed
	}
	binary.BigEndian.PutUint16(buf, uint16(len(msg)))
	_, err := st.Write(append(buf[:2], msg...))
	return err
}

func (cs *quicClients) established() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.up
}

func (cs *quicClients) close() {
	for _, c := range cs.conns {
		if c != nil {
			c.CloseWithError(0, "")
		}
	}
	for _, tr := range cs.trs {
		tr.Close()
		tr.Conn.Close()
	}
	cs.wg.Wait()
}
