package gateway

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestUDPDatagramsClassified: the UDP side of the shared port takes
// datagrams and sorts them into CoAP, the reliable-UDP core and unknown.
func TestUDPDatagramsClassified(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	c, err := net.Dial("udp", g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	coapGet := []byte{0x40, 0x01, 0x12, 0x34, 0xb4, 't', 'e', 'm', 'p'} // CON GET /temp
	rudp := append([]byte{0xE3, 0x55}, make([]byte, 14)...)
	for range 3 {
		c.Write(coapGet)
	}
	c.Write(rudp)
	c.Write([]byte("hello?"))
	eventually(t, "datagram counts", func() bool {
		m := httpGet(t, g, "/metrics")
		return metric(m, `edgemux_datagrams_total{class="coap"}`) == "3" &&
			metric(m, `edgemux_datagrams_total{class="rudp"}`) == "1" &&
			metric(m, `edgemux_datagrams_total{class="unknown"}`) == "1" &&
			// By default rudp (to the private pool, whose endpoint
			// counts this header-only one as malformed) and CoAP are
			// routed: the rest is dropped.
			metric(m, `edgemux_datagram_drops_total{reason="unrouted"}`) == "1" &&
			metric(m, `edgemux_rudp_events_total{event="malformed"}`) == "1"
	})
	// The CoAP pool answers: the same ACK 4.04 three times, the first
	// served and the duplicates (same Message ID) from its response cache.
	buf := make([]byte, 2048)
	for i := range 3 {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if n < 4 || buf[0]>>4 != 0x6 || buf[1] != 0x84 || buf[2] != 0x12 || buf[3] != 0x34 {
			t.Fatalf("answer %d = % x, want ACK 4.04 for message 0x1234", i, buf[:n])
		}
	}
}

// TestUDPBuffersReported: the socket buffers the kernel gave are what
// /metrics reports; asked for more than the kernel's default, they are
// larger than it (as root SO_RCVBUFFORCE ignores net.core.rmem_max;
// otherwise rmem_max caps them, and it is above the default).
func TestUDPBuffersReported(t *testing.T) {
	cfg := testConfig(t)
	cfg.UDP.ReadBuffer, cfg.UDP.WriteBuffer = 1<<20, 512<<10
	g := startGateway(t, cfg, Options{})
	m := httpGet(t, g, "/metrics")
	fresh, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defaultRcv, err := unix.GetsockoptInt(fresh, unix.SOL_SOCKET, unix.SO_RCVBUF)
	unix.Close(fresh)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range g.udp {
		rcv, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		if err != nil {
			t.Fatal(err)
		}
		snd, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
		if err != nil {
			t.Fatal(err)
		}
		s := strconv.Itoa(i)
		if got := metric(m, `edgemux_udp_buffer_bytes{dir="receive",socket="`+s+`"}`); parseMetric(got) != rcv {
			t.Errorf("socket %s: receive buffer %d, /metrics says %q", s, rcv, got)
		}
		if got := metric(m, `edgemux_udp_buffer_bytes{dir="send",socket="`+s+`"}`); parseMetric(got) != snd {
			t.Errorf("socket %s: send buffer %d, /metrics says %q", s, snd, got)
		}
		if rcv <= defaultRcv {
			t.Errorf("socket %s: receive buffer %d, not above the kernel's default %d", s, rcv, defaultRcv)
		}
	}
}

// TestUDPRecvBatches: one recvmmsg call of the loop's UDP socket (recv)
// takes every datagram that waits, up to the configured batch, each whole
// and in order. The datagrams are queued one at a time, each seen in the
// socket's receive memory before the next is sent, so all of them wait
// when recv is called. With a batch of 1 recv returns 1 and this fails;
// TestUDPDatagramsClassified, which counts classes, passes either way.
func TestUDPRecvBatches(t *testing.T) {
	const n = 8
	batch := testConfig(t).UDP.Batch
	if batch < n {
		t.Fatalf("default udp.batch %d: this test needs at least %d", batch, n)
	}
	u, err := openUDP(netip.MustParseAddrPort("127.0.0.1:0"), udpOptions{batch: batch, maxDatagram: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	c := dialSocket(t, u)
	sent := make([][]byte, n)
	for i := range sent {
		// CoAP CON GET with message id i and i bytes of token: every
		// datagram has its own length and content.
		sent[i] = append([]byte{0x40 | byte(i), 0x01, 0x00, byte(i)}, bytes.Repeat([]byte{'t'}, i)...)
		before := rcvMem(t, u.fd)
		if _, err := c.Write(sent[i]); err != nil {
			t.Fatal(err)
		}
		eventually(t, "datagram queued", func() bool { return rcvMem(t, u.fd) > before })
	}
	got, err := u.recv()
	if err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("one recv took %d of the %d waiting datagrams (batch %d)", got, n, batch)
	}
	for i, want := range sent {
		if d, _ := u.datagram(i); !bytes.Equal(d, want) {
			t.Errorf("datagram %d: got % x, want % x", i, d, want)
		}
	}
	if more, err := u.recv(); more != 0 || err != nil {
		t.Errorf("after the batch recv = %d, %v; want 0, nil", more, err)
	}
}

// soMeminfo is SO_MEMINFO (asm-generic/socket.h: amd64, arm, arm64,
// riscv64), which golang.org/x/sys/unix does not name.
const soMeminfo = 55

// rcvMem is the memory the datagrams queued on fd hold (SO_MEMINFO's
// SK_MEMINFO_RMEM_ALLOC): it grows by each one the kernel queues.
func rcvMem(t *testing.T, fd int) uint32 {
	t.Helper()
	var info [unix.SK_MEMINFO_VARS]uint32
	size := uint32(unsafe.Sizeof(info))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, soMeminfo,
		uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		t.Fatalf("getsockopt SO_MEMINFO: %v", e)
	}
	return info[unix.SK_MEMINFO_RMEM_ALLOC]
}

// parseMetric reads a metric's value as an integer (Prometheus prints
// large ones as 2.097152e+06); -1 when it is not a number.
func parseMetric(v string) int {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return -1
	}
	return int(f)
}

// TestUDPBatchAsConfigured: udp.batch is what one recvmmsg takes, up to
// config's limit of 1,024; openUDP used to cap it at 64 without a word.
func TestUDPBatchAsConfigured(t *testing.T) {
	const n = 100
	u, err := openUDP(netip.MustParseAddrPort("127.0.0.1:0"), udpOptions{batch: 1024, maxDatagram: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	if len(u.msgs) != 1024 {
		t.Fatalf("batch 1024 gave %d receive slots", len(u.msgs))
	}
	c := dialSocket(t, u)
	for i := range n {
		before := rcvMem(t, u.fd)
		if _, err := c.Write([]byte{0x40, 0x01, 0x00, byte(i)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "datagram queued", func() bool { return rcvMem(t, u.fd) > before })
	}
	if got, err := u.recv(); got != n || err != nil {
		t.Fatalf("one recv took %d of the %d waiting datagrams (%v)", got, n, err)
	}
}

// TestPortTakenForUDPTriesAnother: with listen port 0 the kernel picks a
// port free for TCP that may be taken for UDP; the gateway lets go of
// what it bound and tries another (here the first three binds fail as if
// taken). It then serves TCP and UDP on one port, and after Close no fd
// or goroutine of the failed attempts is left.
func TestPortTakenForUDPTriesAnother(t *testing.T) {
	fds, goroutines := baseline(t)
	g, err := New(testConfig(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.udpBindFails = 3
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	select {
	case <-g.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	if g.udpBindFails != 0 {
		t.Fatalf("%d failing binds left", g.udpBindFails)
	}
	dev := dialUDPDevice(t, g.Addr().String(), "after-retries")
	if err := dev.Publish("retry/ok", []byte("1"), true); err != nil {
		t.Fatal(err)
	}
	if body := httpGet(t, g, "/healthz"); body == "" {
		t.Fatal("no /healthz over TCP")
	}
	dev.Close()
	g.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	expectReleased(t, g, fds, goroutines)
}

// dialSocket is a client socket connected to u, closed when the test ends.
func dialSocket(t *testing.T, u *udpSocket) *net.UDPConn {
	t.Helper()
	sa, err := unix.Getsockname(u.fd)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addrPort(sa)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
