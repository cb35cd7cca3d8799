package gateway

import (
	"io"
	"os"
	"testing"
	"time"
)

// TestRegistrySizedFromMaxConns: the registry covers the fds that
// max_conns connections can take, not RLIMIT_NOFILE.
func TestRegistrySizedFromMaxConns(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxConns, cfg.Limits.MaxConnsPerIP, cfg.Limits.MaxSniffing = 1000, 1000, 1000
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := 2*1000 + cfg.Admin.MaxConns + fdReserve
	if tb := g.workers[0].fds.size(); g.reg.Size() != want || tb < want || tb >= want+fdPage {
		t.Fatalf("registry %d slots, worker table %d fds; want %d (rlimit %d)", g.reg.Size(), tb, want, rlimitNoFile())
	}
}

// TestFDBeyondRegistryRefused fills the process's low fd numbers so that
// the next accepted connection's fd is past the registry: it is refused
// and counted, nothing indexes past a table, and once fds are free again
// connections are served.
func TestFDBeyondRegistryRefused(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxConns, cfg.Limits.MaxConnsPerIP, cfg.Limits.MaxSniffing = 8, 8, 8
	cfg.Limits.MaxSniffingPerIP = 8
	cfg.Admin.MaxConns = 8
	g := startGateway(t, cfg, Options{})
	var filler []*os.File
	defer func() {
		for _, f := range filler {
			f.Close()
		}
	}()
	for len(filler) < g.reg.Size() {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		filler = append(filler, f)
	}
	c := dial(t, g)
	c.SetReadDeadline(time.Now().Add(rbIOTimeout))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF && !rbIsReset(err) {
		t.Fatalf("connection past the registry: read %v, want it closed", err)
	}
	eventually(t, "the refusal counted", func() bool {
		return metric(httpGetAfter(t, g, &filler), `edgemux_refused_total{reason="registry"}`) == "1"
	})
}

// httpGetAfter frees the filler fds, then fetches /metrics (the admin
// connection needs an fd inside the registry too).
func httpGetAfter(t *testing.T, g *Gateway, filler *[]*os.File) string {
	for _, f := range *filler {
		f.Close()
	}
	*filler = nil
	return httpGet(t, g, "/metrics")
}
