package gateway

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
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

// TestAcceptTrickle: connections that come one at a time (each dials,
// says HELLO, gets its ACK and closes before the next) cost one accept4
// each: the loop does not probe the listener to EAGAIN after each.
func TestAcceptTrickle(t *testing.T) {
	const conns = 100
	var ok, again atomic.Int64
	testHookAccept = func(err error) { // before the gateway starts: its loops read it
		switch {
		case err == nil:
			ok.Add(1)
		case errors.Is(err, unix.EAGAIN):
			again.Add(1)
		}
	}
	t.Cleanup(func() { testHookAccept = nil })
	g := startGateway(t, rbConfig(t), Options{})
	for i := range conns {
		c, err := rbHelloConn(g.Addr().String(), rbAnySource, "trickle-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.Close()
	}
	if ok.Load() < conns {
		t.Fatalf("%d accepts for %d connections", ok.Load(), conns)
	}
	if a := again.Load(); a > conns/4 {
		t.Fatalf("%d accept4 calls met EAGAIN for %d connections one at a time, want few", a, conns)
	}
}

// TestAcceptFlood: many connections at once, far more than one burst:
// every one is accepted and answered (the listener, level-triggered,
// reports what a burst left).
func TestAcceptFlood(t *testing.T) {
	const conns, parallel = 600, 64
	g := startGateway(t, rbConfig(t), Options{})
	errs := make(chan error, conns)
	sem := make(chan struct{}, parallel)
	var open []net.Conn
	var mu sync.Mutex
	for i := range conns {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			c, err := rbHelloConn(g.Addr().String(), rbSource(i%8), "flood-"+strconv.Itoa(i))
			if err == nil {
				mu.Lock()
				open = append(open, c)
				mu.Unlock()
			}
			errs <- err
		}()
	}
	for range conns {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range open {
		c.Close()
	}
}
