package gateway

import (
	"net/netip"
	"testing"
	"unsafe"
)

// TestConnStaysSmall: every idle connection carries one conn; keep it in
// the 80-byte size class (see the conn doc comment).
func TestConnStaysSmall(t *testing.T) {
	if size := unsafe.Sizeof(conn{}); size > 80 {
		t.Fatalf("sizeof(conn) = %d, want <= 80", size)
	}
}

// The conn keeps its peer as 16 bytes and a port; Peer gives back what
// accept gave (IPv4 unmapped, IPv6 as it came) and nothing for none.
func TestConnPeerRoundTrip(t *testing.T) {
	for _, s := range []string{"192.0.2.7:40000", "[2001:db8::1]:5020", "[::1]:1", "0.0.0.0:0"} {
		want := netip.MustParseAddrPort(s)
		if got := newConn(nil, 3, 1, want, 0, 0).Peer(); got != want {
			t.Errorf("peer %v came back as %v", want, got)
		}
	}
	if got := newConn(nil, 3, 1, netip.AddrPort{}, 0, 0).Peer(); got.IsValid() {
		t.Errorf("no peer came back as %v", got)
	}
}
