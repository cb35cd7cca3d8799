package gateway

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestIdleConnectionsCostNoGoroutines: 8,000 private-protocol connections
// that said HELLO and then stay silent are held by the gateway without a
// goroutine each (the goroutine count barely moves), /metrics counts them
// all as active, and once the clients hang up the registry empties.
func TestIdleConnectionsCostNoGoroutines(t *testing.T) {
	n := 8000
	if testing.Short() {
		n = 1000
	}
	g := startGateway(t, rbConfig(t), Options{})
	addr := g.Addr().String()

	// Let the loops and workers settle (they are started by Run), then
	// take the baseline. A scrape first, so the admin server's own
	// goroutines are part of it.
	httpGet(t, g, "/healthz")
	before := rbSettledGoroutines()

	t0 := time.Now()
	conns := rbOpenIdle(t, n, 8, func(i int) (net.Conn, error) {
		return rbHelloConn(addr, rbSource(0), fmt.Sprintf("idle-%d", i))
	})
	t.Logf("opened in %v", time.Since(t0))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	eventually(t, "every connection in the registry", func() bool { return g.reg.Len() >= n })

	t0 = time.Now()
	after := rbSettledGoroutines()
	t.Logf("settled in %v", time.Since(t0))
	t.Logf("goroutines: %d before, %d with %d idle connections", before, after, n)
	if grew := after - before; grew >= 50 {
		t.Errorf("goroutines grew by %d with %d idle connections; want < 50", grew, n)
	}
	m := httpGet(t, g, "/metrics")
	if v := metric(m, `edgemux_connections{protocol="private",state="active"}`); v != strconv.Itoa(n) {
		t.Errorf("private active connections = %q, want %d", v, n)
	}

	for i, c := range conns {
		c.Close()
		conns[i] = nil
	}
	eventually(t, "the registry to empty", func() bool { return g.reg.Len() == 0 })
	m = httpGet(t, g, "/metrics")
	if v := metric(m, `edgemux_connections{protocol="private",state="active"}`); v != "0" {
		t.Errorf("private active connections after close = %q, want 0 (the series stays)", v)
	}
}

// rbOpenIdle opens n connections with dial (given the connection's
// index) from a few goroutines; the caller closes them. Clients keep no
// goroutine per connection, so only the server's count is measured.
func rbOpenIdle(t *testing.T, n, workers int, dial func(i int) (net.Conn, error)) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				c, err := dial(i)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		t.Fatal(err)
	}
	return conns
}

// rbSettledGoroutines is the goroutine count once it stops changing for a
// few polls (goroutines that are exiting, such as finished dialers or the
// HTTP client's, are not counted).
func rbSettledGoroutines() int {
	last, same := runtime.NumGoroutine(), 0
	for i := 0; i < 500 && same < 5; i++ {
		time.Sleep(10 * time.Millisecond)
		runtime.GC()
		n := runtime.NumGoroutine()
		if n == last {
			same++
		} else {
			last, same = n, 0
		}
	}
	return last
}
