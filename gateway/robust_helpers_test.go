package gateway

// Helpers for the robustness tests (robust_test.go, idle_test.go,
// reuse_test.go): raw private-protocol frames over plain net.Conns, so
// thousands of clients cost no goroutine each, source addresses beyond
// 127.0.0.1 for more ephemeral ports, and a non-blocking "has the peer
// closed?" probe.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

// rbIOTimeout bounds every single client read or write: a hang guard
// for a loaded machine, not a performance assertion.
const rbIOTimeout = 60 * time.Second

// rbConfig is testConfig with admission caps and bans opened up, so
// that thousands of connections from a handful of loopback addresses are
// never refused or banned unless a test asks for it.
func rbConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.Limits.MaxConns = 19000
	cfg.Limits.MaxConnsPerIP = 19000
	cfg.Limits.MaxSniffing = 19000
	cfg.Limits.MaxSniffingPerIP = 19000
	cfg.Quarantine.BanAfter = 1000000
	cfg.Log.Level = "error"
	return cfg
}

// rbRunGateway runs an already built gateway until the test ends and returns
// the channel that receives Run's result (the cleanup drains it unless the
// test did).
func rbRunGateway(t *testing.T, g *Gateway) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	select {
	case <-g.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return done
}

// rbAnySource is the zero netip.Addr: dial from the default source address.
var rbAnySource netip.Addr

// rbSource is the i-th extra loopback source address: 127.0.0.2, .3, ...
// Each has its own ephemeral port range, so connections that linger in
// TIME_WAIT on one do not starve the others.
func rbSource(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 0, byte(i / 250), byte(2 + i%250)})
}

// rbDialFrom connects to addr from the source address src. The port is
// chosen at connect, not at bind (IP_BIND_ADDRESS_NO_PORT), so the kernel
// may reuse ports whose old connections wait in TIME_WAIT (tcp_tw_reuse on
// loopback), as it does for a plain dial; bind(port 0) never would, and
// churning tests would run out of ports.
func rbDialFrom(addr string, src netip.Addr) (net.Conn, error) {
	d := net.Dialer{
		Timeout:   rbIOTimeout,
		LocalAddr: &net.TCPAddr{IP: src.AsSlice()},
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
			})
			return errors.Join(err, serr)
		},
	}
	return d.Dial("tcp", addr)
}

func rbHelloFrame(device string) []byte {
	f, err := private.AppendHello(nil, private.Hello{DeviceID: []byte(device)})
	if err != nil {
		panic(err) // test bug: a device id that does not encode
	}
	return f
}

func rbSubFrame(msgID uint32, filter string) []byte {
	f, err := private.AppendSub(nil, private.Sub{MsgID: msgID, Filter: []byte(filter)})
	if err != nil {
		panic(err)
	}
	return f
}

func rbPubFrame(msgID uint32, topic string, data []byte) []byte {
	f, err := private.AppendPub(nil, private.Pub{MsgID: msgID, Topic: []byte(topic), Data: data})
	if err != nil {
		panic(err)
	}
	return f
}

func rbPingFrame(token uint64) []byte {
	var tok [8]byte
	binary.BigEndian.PutUint64(tok[:], token)
	return private.AppendFrame(nil, private.TypePing, tok[:])
}

// rbRawHeader is a private frame header with any length: for frames that
// announce more than the receiver accepts. The CRC is left zero: the
// length is checked before the CRC, and the frame is never completed.
func rbRawHeader(typ private.Type, length uint32) []byte {
	h := []byte{private.Magic0, private.Magic1, private.Version, byte(typ), 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[4:8], length)
	return h
}

// rbWrite writes p with the usual hang guard.
func rbWrite(c net.Conn, p []byte) error {
	c.SetWriteDeadline(time.Now().Add(rbIOTimeout))
	_, err := c.Write(p)
	return err
}

// rbReadFrame reads one whole private frame from c (blocking, with the hang
// guard) and checks it with the codec. The payload is freshly allocated.
func rbReadFrame(c net.Conn) (private.Frame, error) { return rbReadFrameFrom(c, c) }

// rbReadFrameFrom is rbReadFrame reading through r (a buffered reader of
// c, say), with the hang guard set on c.
func rbReadFrameFrom(c net.Conn, r io.Reader) (private.Frame, error) {
	c.SetReadDeadline(time.Now().Add(rbIOTimeout))
	var hdr [private.HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return private.Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[4:8])
	if n > private.DefaultMaxFrame {
		return private.Frame{}, fmt.Errorf("frame announces %d bytes", n)
	}
	buf := make([]byte, private.HeaderLen+int(n))
	copy(buf, hdr[:])
	if _, err := io.ReadFull(r, buf[private.HeaderLen:]); err != nil {
		return private.Frame{}, err
	}
	f, used, err := private.ParseFrame(buf, private.DefaultMaxFrame)
	if err == nil && used != len(buf) {
		err = errors.New("frame not parsed whole")
	}
	return f, err
}

// rbExpectAck reads one frame and checks that it is ACK{id, OK}.
func rbExpectAck(c net.Conn, id uint32) error {
	f, err := rbReadFrame(c)
	if err != nil {
		return fmt.Errorf("waiting for ACK %d: %w", id, err)
	}
	if f.Type != private.TypeAck {
		return fmt.Errorf("want ACK %d, got %v %x", id, f.Type, f.Payload)
	}
	a, err := private.DecodeAck(f.Payload)
	if err != nil {
		return err
	}
	if a.MsgID != id || a.Status != private.CodeOK {
		return fmt.Errorf("want ACK{%d, ok}, got ACK{%d, %v}", id, a.MsgID, a.Status)
	}
	return nil
}

// rbHelloConn dials (from src unless it is invalid), says HELLO and waits
// for its ACK.
func rbHelloConn(addr string, src netip.Addr, device string) (net.Conn, error) {
	var c net.Conn
	var err error
	if src.IsValid() {
		c, err = rbDialFrom(addr, src)
	} else {
		c, err = net.DialTimeout("tcp", addr, rbIOTimeout)
	}
	if err != nil {
		return nil, err
	}
	if err := rbWrite(c, rbHelloFrame(device)); err != nil {
		c.Close()
		return nil, err
	}
	if err := rbExpectAck(c, 0); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// rbPeerState says, without blocking or consuming anything, whether the peer
// has closed c: io.EOF for an orderly close, the socket error (ECONNRESET)
// for a reset, nil while it is open (whether or not bytes are waiting).
func rbPeerState(c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var state error
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case rerr == nil && n == 0:
			state = io.EOF
		case rerr != nil && !errors.Is(rerr, unix.EAGAIN) && !errors.Is(rerr, unix.EINTR):
			state = rerr
		}
		return true // never wait for readiness
	})
	if err != nil {
		return err
	}
	return state
}

// rbCloseAbort closes c with a reset instead of a FIN, so the client side
// leaves nothing in TIME_WAIT.
func rbCloseAbort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// rbFetch GETs path from the gateway at addr; unlike httpGet it returns
// errors, for endpoints that may not answer yet.
func rbFetch(addr, path string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), nil
}

// rbEventually is eventually with a longer hang guard, for waits whose
// length scales with thousands of connections on a loaded machine.
func rbEventually(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out (hang guard %s) waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rbRoundTrip publishes a unique payload on the client's own topic (which it
// must have subscribed to) and waits for exactly that delivery.
func rbRoundTrip(c *private.Client, topic string, payload []byte) error {
	if err := c.Publish(topic, payload, true); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	timer := time.NewTimer(rbIOTimeout)
	defer timer.Stop()
	select {
	case m, ok := <-c.Messages():
		switch {
		case !ok:
			return fmt.Errorf("connection ended: %v", c.Err())
		case m.Topic != topic || string(m.Data) != string(payload):
			return fmt.Errorf("got %s=%q, want %s=%q", m.Topic, m.Data, topic, payload)
		}
		return nil
	case <-timer.C:
		return errors.New("no delivery (hang guard)")
	}
}

// rbDialClient is private.Dial with the hang guard.
func rbDialClient(t *testing.T, addr, device string) *private.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rbIOTimeout)
	defer cancel()
	c, err := private.Dial(ctx, addr, device, private.ClientOptions{Timeout: rbIOTimeout})
	if err != nil {
		t.Fatalf("private.Dial %s: %v", device, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rbMetric fetches /metrics through addr and returns one series' value.
func rbMetric(addr, series string) (string, error) {
	body, err := rbFetch(addr, "/metrics")
	if err != nil {
		return "", err
	}
	return metric(body, series), nil
}

// rbIsReset reports whether err is a connection reset or a broken pipe:
// how a socket the peer closed with unread data reports it.
func rbIsReset(err error) bool {
	return errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) ||
		strings.Contains(fmt.Sprint(err), "connection reset")
}
