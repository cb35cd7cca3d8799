package gateway

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/registry"
)

// TestAcceptedNoDelay: the gateway's end of an accepted connection has
// TCP_NODELAY (from the listener, not a setsockopt per accept), so its
// answers are not held back by Nagle waiting for the peer's ACK.
func TestAcceptedNoDelay(t *testing.T) {
	g := startGateway(t, rbConfig(t), Options{})
	c, err := rbHelloConn(g.Addr().String(), rbAnySource, "nodelay")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.TCPAddr).AddrPort()
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	fd := -1
	for i := 0; i < g.reg.Size(); i++ {
		s := g.reg.Slot(i)
		if s.State() == registry.Active && s.Peer() == local {
			fd = i
		}
	}
	if fd < 0 {
		t.Fatalf("no active connection from %v in the registry", local)
	}
	v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
	if err != nil || v == 0 {
		t.Fatalf("TCP_NODELAY on the gateway's end: %d, %v; want set", v, err)
	}
}
