package coap

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/plgd-dev/go-coap/v3/message/codes"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// source is the i-th of many distinct loopback sources.
func source(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, byte(1 + i>>16), byte(i >> 8), byte(i)}), uint16(1024+i%50000))
}

// TestIdlePeerMemory: 10,000 peers that each made one GET cost at most
// 2 KB each, their answers in the response cache included.
func TestIdlePeerMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("memory figures are meaningless under the race detector")
	}
	tb := newTestbed(t, Config{MaxPeers: 10000})
	tb.publish("x", "21.5")
	get := msg{typ: con, code: codes.GET, mid: 1, token: "tk", path: "/t/x"}.encode(t)
	tb.e.Input(source(-1), get, tb.now) // warm up buffers
	tb.sent = nil
	before := heapInUse()
	for i := range 10000 {
		tb.e.Input(source(i), get, tb.now)
		tb.sent = tb.sent[:0]
	}
	after := heapInUse()
	if n := tb.e.Peers(); n != 10000 {
		t.Fatalf("%d peers, want 10,000", n)
	}
	per := float64(after-before) / 10000
	t.Logf("%.0f bytes per idle peer (heap), response cache included", per)
	if per > 2048 {
		t.Errorf("%.0f bytes per idle peer, want at most 2 KB", per)
	}
}

// TestSpoofedFloodBounded: 300,000 requests from as many sources (a
// spoofed flood, go-coap #222) leave the peers at coap.max_peers and the
// heap where 100,000 left it.
func TestSpoofedFloodBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("memory figures are meaningless under the race detector")
	}
	tb := newTestbed(t, Config{MaxPeers: 10000})
	get := msg{typ: con, code: codes.GET, mid: 1, path: "/t/none"}.encode(t)
	flood := func(from, to int) {
		for i := from; i < to; i++ {
			tb.e.Input(source(i), get, tb.now)
			tb.sent = tb.sent[:0]
		}
	}
	flood(0, 100000)
	base := heapInUse()
	flood(100000, 300000)
	grown := int64(heapInUse()) - int64(base)
	if n := tb.e.Peers(); n != 10000 {
		t.Errorf("%d peers after the flood, want the cap, 10,000", n)
	}
	t.Logf("heap grew %d bytes over 200,000 more sources", grown)
	if grown > 1<<20 {
		t.Errorf("heap grew %d bytes over 200,000 more sources, want it flat (under 1 MiB)", grown)
	}
	if st := tb.h.Stats(); st.PeersEvicted != 290000 {
		t.Errorf("evicted %d, want 290,000", st.PeersEvicted)
	}
}
