package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/routetest"
)

// everyPolicy is every dispatch policy: tests of the paths an event takes
// run under each.
var everyPolicy = []string{"entropy", "roundrobin", "inline"}

// testConfig is the default configuration on an ephemeral loopback port.
func testConfig(t testing.TB) config.Config {
	t.Helper()
	cfg, err := config.Parse(config.DefaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.Loops = 2
	return cfg
}

// startGateway runs a gateway until the test ends.
func startGateway(t *testing.T, cfg config.Config, opt Options) *Gateway {
	t.Helper()
	g, err := New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	select {
	case <-g.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		g.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return g
}

// eventually polls cond until it holds or a generous limit passes; the
// limit is a hang guard, not a performance assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	routetest.Eventually(t, what, cond)
}

// httpGet fetches path from the gateway's admin endpoints.
func httpGet(t *testing.T, g *Gateway, path string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + g.Addr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return string(b)
}

// metric returns the value line of a Prometheus series, "" when absent.
func metric(body, series string) string {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			return strings.TrimPrefix(line, series+" ")
		}
	}
	return ""
}

func dial(t *testing.T, g *Gateway) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", g.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// netDialer dials the gateway whatever address a client asks for.
type netDialer struct{ addr string }

func (d *netDialer) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, "tcp", d.addr)
}
