package gateway

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAcceptFDPeerAddress: the address acceptFD decodes from the loop's
// buffer is the client's, port byte order included, for IPv4 and IPv6.
func TestAcceptFDPeerAddress(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(listen, func(t *testing.T) {
			lfd, addr := listenForTest(t, listen)
			c, err := net.Dial("tcp", addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var a acceptAddr
			// On loopback the handshake is done when Dial returns: the
			// connection waits in the accept queue.
			fd, peer, err := acceptFD(lfd, &a, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
			if want := c.LocalAddr().(*net.TCPAddr).AddrPort(); peer != want {
				t.Fatalf("peer %v, want %v", peer, want)
			}
		})
	}
}

// TestAcceptAndPeekAllocateNothing: taking a new connection (accept4 and
// the sniffer's first MSG_PEEK) allocates nothing. unix.Accept4 and
// unix.Recvfrom allocated about 250 bytes per connection, garbage that
// every new connection left for the collector (fails before the commit
// that added acceptFD: 3 allocations per connection).
func TestAcceptAndPeekAllocateNothing(t *testing.T) {
	lfd, addr := listenForTest(t, "127.0.0.1:0")
	const runs = 20
	for range runs + 1 { // AllocsPerRun calls f once more to warm up
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// Loopback delivers the bytes into the server socket before
		// Write returns: the peek below finds them.
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	l := &loop{peek: make([]byte, 16)}
	failed := 0
	allocs := testing.AllocsPerRun(runs, func() {
		fd, _, err := acceptFD(lfd, &l.peer, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			failed++
			return
		}
		if n, err := peekFD(fd, l.peek); err != nil || n != 5 {
			failed++
		}
		unix.Close(fd)
	})
	if failed > 0 {
		t.Fatalf("%d of %d accepts or peeks failed", failed, runs+1)
	}
	if allocs != 0 {
		t.Fatalf("accept and peek allocate %.1f times per connection, want 0", allocs)
	}
}

// listenForTest opens a listening socket as a loop does; it skips when
// the address family is missing here (no IPv6 loopback).
func listenForTest(t *testing.T, listen string) (int, netip.AddrPort) {
	t.Helper()
	lfd, addr, err := listenTCP(netip.MustParseAddrPort(listen))
	if err != nil {
		t.Skipf("listen %s: %v", listen, err)
	}
	t.Cleanup(func() { unix.Close(lfd) })
	return lfd, addr
}
