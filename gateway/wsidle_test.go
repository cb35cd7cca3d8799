package gateway

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsHandshake opens a raw WebSocket connection (upgrade request, 101
// answer) and leaves it idle; no goroutine is kept per client.
func wsHandshake(addr string, src int, key int) (net.Conn, error) {
	c, err := rbDialFrom(addr, rbSource(src))
	if err != nil {
		return nil, err
	}
	req := "GET /ws HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: edgemux.v1\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("edgemux-key%05d", key%100000))) + "\r\n\r\n"
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte(req)); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, fmt.Errorf("handshake: %s", resp.Status)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// TestIdleWebSocketsCostNoGoroutines: upgraded WebSocket connections that
// stay idle are held by the workers without a goroutine each.
func TestIdleWebSocketsCostNoGoroutines(t *testing.T) {
	n := 4000
	if testing.Short() {
		n = 500
	}
	g := startGateway(t, rbConfig(t), Options{})
	addr := g.Addr().String()
	httpGet(t, g, "/healthz")
	before := rbSettledGoroutines()

	conns := rbOpenIdle(t, n, 8, func(i int) (net.Conn, error) { return wsHandshake(addr, 0, i) })
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	after := rbSettledGoroutines()
	t.Logf("goroutines: %d before, %d with %d idle WebSocket connections", before, after, n)
	if grew := after - before; grew >= 50 {
		t.Errorf("goroutines grew by %d with %d idle WebSocket connections; want < 50", grew, n)
	}
	m := httpGet(t, g, "/metrics")
	if v := metric(m, `edgemux_connections{protocol="websocket",state="active"}`); v != strconv.Itoa(n) {
		t.Errorf("websocket active connections = %q, want %d", v, n)
	}
	if v := metric(m, `edgemux_websocket_total{event="upgrades"}`); v != strconv.Itoa(n) {
		t.Errorf("websocket upgrades = %q, want %d", v, n)
	}
	if up := g.Snapshot().WebSocket["upgrades"]; up != uint64(n) {
		t.Errorf("snapshot: %d upgrades, want %d", up, n)
	}
}

// TestReloadWebSocketSettings: a reload changes allowed_origins for the
// next handshake, and a changed section that needs a restart is reported,
// not silently ignored.
func TestReloadWebSocketSettings(t *testing.T) {
	cfg := rbConfig(t)
	cfg.WebSocket.AllowedOrigins = []string{"https://a.example"}
	g := startGateway(t, cfg, Options{})
	url := "ws://" + g.Addr().String() + "/ws"
	dialFrom := func(origin string) (int, error) {
		d := websocket.Dialer{HandshakeTimeout: rbIOTimeout}
		ws, resp, err := d.Dial(url, http.Header{"Origin": {origin}})
		if ws != nil {
			ws.Close()
		}
		if resp == nil {
			return 0, err
		}
		return resp.StatusCode, nil
	}
	if code, err := dialFrom("https://b.example"); code != http.StatusForbidden {
		t.Fatalf("origin b before reload: %d, %v", code, err)
	}
	next := rbConfig(t)
	next.WebSocket.AllowedOrigins = []string{"https://b.example"}
	next.Private.MaxSubs = 3 // needs a restart
	err := g.Reload(next)
	if !errors.Is(err, errRestartCfg) || !strings.Contains(err.Error(), "private") {
		t.Errorf("Reload = %v, want private reported as needing a restart", err)
	}
	if code, err := dialFrom("https://b.example"); code != http.StatusSwitchingProtocols {
		t.Fatalf("origin b after reload: %d, %v", code, err)
	}
	if code, _ := dialFrom("https://a.example"); code != http.StatusForbidden {
		t.Errorf("origin a after reload: %d, want 403", code)
	}
}
