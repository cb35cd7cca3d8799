package gateway

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/route"
)

// placementClient is a private-protocol device dialling from its own
// loopback address, as devices on a network come from their own.
func placementClient(t *testing.T, g *Gateway, from string) *private.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := private.Dial(ctx, g.Addr().String(), "dev-"+from, private.ClientOptions{Dialer: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ping(t *testing.T, c *private.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range n {
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// workerOf is the global worker index owning the live connection from
// the address from.
func workerOf(t *testing.T, g *Gateway, from string) int {
	t.Helper()
	for _, v := range g.reg.Snapshot(nil, 1<<20) {
		if ap, err := netip.ParseAddrPort(v.Peer); err == nil && ap.Addr().String() == from && v.State == "active" {
			return v.Worker
		}
	}
	t.Fatalf("no active connection from %s", from)
	return -1
}

// TestHistoryPlacesReconnect: a device that was bursty and heavy last
// time is placed by its history when it redials, so the two quiet devices
// that connect after it share the other worker instead of one of them
// landing with it, as the rotation alone would have it. Fails before the
// history table: the heavy device's reconnect weighed 1, and the third
// connection went back to its worker.
func TestHistoryPlacesReconnect(t *testing.T) {
	cfg := testConfig(t)
	cfg.Dispatch.Policy = "entropy"
	pc := cfg.Pools["private"]
	pc.Workers, pc.Pattern = 2, ""
	cfg.Pools["private"] = pc
	g := startGateway(t, cfg, Options{})
	p := g.byPool["private"]
	const heavy, quiet1, quiet2 = "127.0.0.2", "127.0.0.3", "127.0.0.4"

	// First visit: back-to-back pings, a window's worth several times.
	c := placementClient(t, g, heavy)
	ping(t, c, 20*route.ProfileWindow)
	c.Close()
	heavyAddr := netip.MustParseAddr(heavy)
	var pat route.Pattern
	var weight uint32
	eventually(t, "the heavy device's class recorded at close", func() bool {
		var ok bool
		pat, weight, ok = p.history.Lookup(heavyAddr)
		return ok
	})
	if pat != route.PatternBursty || weight < 3 {
		t.Fatalf("history after back-to-back pings: %v weight %d, want bursty weight >= 3", pat, weight)
	}
	eventually(t, "the first visit released", func() bool { return p.disp.Work(0)+p.disp.Work(1) == 0 })

	// Second visit, then two quiet devices.
	c = placementClient(t, g, heavy)
	ping(t, c, 1)
	for _, q := range []string{quiet1, quiet2} {
		ping(t, placementClient(t, g, q), 1)
	}
	hw, w1, w2 := workerOf(t, g, heavy), workerOf(t, g, quiet1), workerOf(t, g, quiet2)
	if w1 == hw || w2 == hw {
		t.Errorf("heavy device on worker %d, quiet ones on %d and %d: want both quiet ones off the heavy one's worker", hw, w1, w2)
	}
	if got := p.disp.Work(hw - p.workers[0].idx); got < int(weight) {
		t.Errorf("the heavy device's worker counts work %d, want at least its remembered weight %d", got, weight)
	}
}

// The seed rides in the EvOpen event's bits 16..31 without touching the
// event bits or the quarantine reason below them.
func TestSeedBits(t *testing.T) {
	for _, tt := range []struct {
		pat        route.Pattern
		weight     uint32
		wantWeight uint32
	}{
		{route.PatternUnknown, 1, 1},
		{route.PatternBursty, 250, 250},
		{route.PatternLongPeriod, 0, 1},
		{route.PatternSteady, 1 << 20, maxSeedWeight},
	} {
		low := uint32(0xffff) // every event bit and reason
		bits := low | seedBits(tt.pat, tt.weight)
		pat, w := seedOf(bits)
		if pat != tt.pat || w != tt.wantWeight || bits&0xffff != low {
			t.Errorf("seed %v/%d read back as %v/%d, low bits %#x", tt.pat, tt.weight, pat, w, bits&0xffff)
		}
	}
}
