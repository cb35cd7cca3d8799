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

// TestHistoryPlacesReconnect: two devices that were bursty last time
// are placed by their history when they redial, with a quiet device
// connecting between them: the second heavy one goes to the worker the
// first is not on. Fails before the history table: both reconnects are
// unknowns of weight 1, the quiet one between them makes the two workers
// equal, and the rotation puts the second heavy device with the first.
func TestHistoryPlacesReconnect(t *testing.T) {
	cfg := testConfig(t)
	cfg.Dispatch.Policy = "entropy"
	pc := cfg.Pools["private"]
	pc.Workers, pc.Pattern = 2, ""
	cfg.Pools["private"] = pc
	g := startGateway(t, cfg, Options{})
	p := g.byPool["private"]
	const heavy1, heavy2, quiet = "127.0.0.2", "127.0.0.3", "127.0.0.4"

	// First visits: back-to-back pings, a window's worth many times.
	for _, h := range []string{heavy1, heavy2} {
		c := placementClient(t, g, h)
		ping(t, c, 20*route.ProfileWindow)
		c.Close()
		addr := netip.MustParseAddr(h)
		var pat route.Pattern
		var weight uint32
		eventually(t, "the heavy device's class recorded at close", func() bool {
			var ok bool
			pat, weight, ok = p.history.Lookup(addr)
			return ok
		})
		if pat != route.PatternBursty || weight < 2 {
			t.Fatalf("history of %s after back-to-back pings: %v weight %d, want bursty, weight >= 2", h, pat, weight)
		}
		eventually(t, "the first visit released", func() bool { return p.disp.Work(0)+p.disp.Work(1) == 0 })
	}

	// Second visits, a quiet device between the heavy ones.
	for _, from := range []string{heavy1, quiet, heavy2} {
		ping(t, placementClient(t, g, from), 1)
	}
	h1, h2 := workerOf(t, g, heavy1), workerOf(t, g, heavy2)
	if h1 == h2 {
		t.Errorf("both heavy devices on worker %d (quiet one on %d)", h1, workerOf(t, g, quiet))
	}
	if got := p.disp.Work(0) + p.disp.Work(1); got < 5 {
		t.Errorf("the pool counts work %d for two remembered heavy devices and a quiet one, want at least 5", got)
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
