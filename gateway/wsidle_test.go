package gateway

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
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
