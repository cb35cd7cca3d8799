package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

// TestPortTakenRefused: a gateway asked for a port that another socket
// holds refuses to start, where SO_REUSEPORT would have let it share the
// port and take part of the other's connections: a second gateway on a
// port a first one serves (TCP), and a foreign SO_REUSEPORT UDP socket
// on the port. The first gateway then still serves, and the refused one
// leaves no fd behind.
func TestPortTakenRefused(t *testing.T) {
	first := startGateway(t, testConfig(t), Options{})
	port := first.Addr().Port()

	cfg := testConfig(t)
	cfg.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	fds := openFDs(t)
	err := runRefused(t, cfg)
	if !errors.Is(err, unix.EADDRINUSE) || !strings.Contains(err.Error(), "listens on") {
		t.Fatalf("second gateway on a served port: %v, want EADDRINUSE naming the listener", err)
	}
	if n := openFDs(t); n != fds {
		t.Fatalf("the refused gateway left %d fds open, had %d before it", n, fds)
	}
	c, err := private.Dial(context.Background(), first.Addr().String(), "still-served", private.ClientOptions{})
	if err != nil {
		t.Fatalf("first gateway after the refusal: %v", err)
	}
	c.Close()

	// UDP: a foreign socket that asks for SO_REUSEPORT too, as the
	// gateway's own do; the kernel would let the gateway join it.
	udp, udpPort := reusePortUDP(t)
	defer unix.Close(udp)
	cfg = testConfig(t)
	cfg.Listen = fmt.Sprintf("127.0.0.1:%d", udpPort)
	err = runRefused(t, cfg)
	if !errors.Is(err, unix.EADDRINUSE) || !strings.Contains(err.Error(), "udp") {
		t.Fatalf("gateway on a port bound for UDP: %v, want EADDRINUSE naming udp", err)
	}
	// With UDP off, that port's TCP side is the gateway's.
	cfg.UDP.Enabled = false
	startGateway(t, cfg, Options{})
}

// TestPortReusedAfterClose: a gateway closed with connections open leaves
// them in TIME_WAIT on its port (it closed first); the next gateway on
// that port starts, as the listeners' SO_REUSEADDR lets them.
func TestPortReusedAfterClose(t *testing.T) {
	g, err := New(testConfig(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := rbRunGateway(t, g)
	addr := g.Addr()
	c, err := private.Dial(context.Background(), addr.String(), "time-wait", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	cfg := testConfig(t)
	cfg.Listen = addr.String()
	startGateway(t, cfg, Options{})
}

// runRefused runs a gateway that must fail to start and returns why.
func runRefused(t *testing.T, cfg config.Config) error {
	t.Helper()
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned no error")
		}
		return err
	case <-g.Ready():
		g.Close()
		<-done
		t.Fatal("the gateway started on a port another socket holds")
	}
	return nil
}

// reusePortUDP binds a UDP socket with SO_REUSEPORT to a free loopback
// port whose TCP side is free too, and returns it and the port.
func reusePortUDP(t *testing.T) (int, uint16) {
	t.Helper()
	for range 16 {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		port := uint16(sa.(*unix.SockaddrInet4).Port)
		if probeBind(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), unix.SOCK_STREAM, true) == nil {
			return fd, port
		}
		unix.Close(fd)
	}
	t.Fatal("no loopback port free for both TCP and UDP")
	return -1, 0
}
