package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Tests of the admin server's connection caps and of request framing,
// over raw sockets from chosen loopback sources.

const healthzRequest = "GET /healthz HTTP/1.1\r\nHost: edgemux.test\r\n\r\n"

// rawExchange sends req on c and reads one response, body included.
func rawExchange(t *testing.T, c net.Conn, br *bufio.Reader, req string) (*http.Response, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatalf("write: %v", err)
	}
	return readResponse(t, br)
}

func readResponse(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(b)
}

// endsCleanly reads what is left on c and reports whether it ended with
// EOF (a close after the answer), not a reset or the safety deadline.
func endsCleanly(c net.Conn, br *bufio.Reader) error {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	rest, err := io.ReadAll(br)
	switch {
	case len(rest) > 0:
		return fmt.Errorf("more bytes after the answer: %.200q", rest)
	case err != nil:
		return err
	}
	return nil
}

// adminHeld is how many admin connections the gateway counts for src.
func adminHeld(g *Gateway, src string) int {
	c := g.admin.conns
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byIP[netip.MustParseAddr(src)]
}

// adminIdle is how many admin connections sit idle between requests.
func adminIdle(g *Gateway) int {
	c := g.admin.conns
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ac := range c.conns {
		if ac.idle != 0 {
			n++
		}
	}
	return n
}

// TestAdminKeepAliveFloodLeavesProbesIn: 64 idle keep-alive connections
// from one address do not lock another address out of /healthz, and each
// of the 64 got an HTTP answer. Fails before this commit: the 64 filled
// admin.max_conns and the other source's connection was closed unanswered.
func TestAdminKeepAliveFloodLeavesProbesIn(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	for i := range 64 {
		c := dialSrc(t, g, "127.0.0.2")
		resp, body := rawExchange(t, c, bufio.NewReader(c), healthzRequest)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("flood connection %d: %s %q", i, resp.Status, body)
		}
		// c stays open and idle: a keep-alive connection.
	}
	if n := adminHeld(g, "127.0.0.2"); n > g.cfg.Admin.MaxConnsPerIP {
		t.Errorf("the flooding source holds %d admin connections, over max_conns_per_ip", n)
	}
	probe := dialSrc(t, g, "127.0.0.3")
	if resp, body := rawExchange(t, probe, bufio.NewReader(probe), healthzRequest); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Fatalf("probe from another source: %s %q", resp.Status, body)
	}
	if got := metric(httpGet(t, g, "/metrics"), `edgemux_refused_total{reason="admin_idle_reclaimed"}`); got == "" || got == "0" {
		t.Errorf("reclaimed idle connections not counted: %q", got)
	}
}

// busyRequest announces a body it does not send: net/http reads it before
// answering, so the connection stays busy until the body comes (or the
// server's 10 s read timeout passes).
const busyRequest = "GET /healthz HTTP/1.1\r\nHost: edgemux.test\r\nContent-Length: 4\r\n\r\n"

// busyConns opens n admin connections from src that are in the middle of a
// request, so none is idle, and waits until the gateway counts them.
func busyConns(t *testing.T, g *Gateway, src string, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for range n {
		c := dialSrc(t, g, src)
		io.WriteString(c, busyRequest)
		cs = append(cs, c)
	}
	eventually(t, "busy admin connections counted", func() bool { return adminHeld(g, src) == n })
	return cs
}

// refusedWith tries a request from src and expects status with a body,
// then a clean close. ok is false when the request was served instead,
// which only a busy connection timed out meanwhile can explain: the
// caller retries.
func refusedWith(t *testing.T, g *Gateway, src string, status int, says string) (ok bool) {
	t.Helper()
	c := dialSrc(t, g, src)
	br := bufio.NewReader(c)
	resp, body := rawExchange(t, c, br, healthzRequest)
	if resp.StatusCode == http.StatusOK {
		return false
	}
	if resp.StatusCode != status || !strings.Contains(body, says) || resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Fatalf("refused from %s: %s %v %q, want %d saying %q, Retry-After, Connection: close", src, resp.Status, resp.Header, body, status, says)
	}
	if err := endsCleanly(c, br); err != nil {
		t.Fatalf("after the %d: %v, want a clean close (not a reset)", status, err)
	}
	return true
}

// TestAdminBusySourceGets429: a source whose connections are all busy is
// answered 429 with a body, not reset; other sources still get /healthz.
// Fails before this commit: there was no per-source cap.
func TestAdminBusySourceGets429(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	for attempt := 0; ; attempt++ {
		busy := busyConns(t, g, "127.0.0.2", g.cfg.Admin.MaxConnsPerIP)
		if refusedWith(t, g, "127.0.0.2", http.StatusTooManyRequests, "admin.max_conns_per_ip") {
			// The busy connections are still served when they finish.
			c := busy[0]
			br := bufio.NewReader(c)
			if resp, _ := rawExchange(t, c, br, "body"); resp.StatusCode != http.StatusOK {
				t.Errorf("a busy connection's request: %s", resp.Status)
			}
			break
		}
		if attempt == 3 {
			t.Fatal("the ninth connection of a busy source was served four times")
		}
		for _, c := range busy {
			c.Close()
		}
		eventually(t, "the busy connections gone", func() bool { return adminHeld(g, "127.0.0.2") == 0 })
	}
	probe := dialSrc(t, g, "127.0.0.3")
	if resp, _ := rawExchange(t, probe, bufio.NewReader(probe), healthzRequest); resp.StatusCode != http.StatusOK {
		t.Fatalf("probe from another source: %s", resp.Status)
	}
	if got := metric(httpGet(t, g, "/metrics"), `edgemux_refused_total{reason="admin_max_conns_per_ip"}`); got == "" || got == "0" {
		t.Errorf("429s not counted: %q", got)
	}
}

// TestAdminTotalCap: with every admin connection busy a newcomer from a
// new source gets 503 with a body; with them idle, the longest-idle one
// makes room and the newcomer is served.
func TestAdminTotalCap(t *testing.T) {
	cfg := testConfig(t)
	cfg.Admin.MaxConns, cfg.Admin.MaxConnsPerIP = 4, 2
	g := startGateway(t, cfg, Options{})
	for attempt := 0; ; attempt++ {
		busy := append(busyConns(t, g, "127.0.0.2", 2), busyConns(t, g, "127.0.0.3", 2)...)
		ok := refusedWith(t, g, "127.0.0.4", http.StatusServiceUnavailable, "admin.max_conns")
		for _, c := range busy {
			c.Close()
		}
		eventually(t, "the busy connections gone", func() bool {
			return adminHeld(g, "127.0.0.2")+adminHeld(g, "127.0.0.3") == 0
		})
		if ok {
			break
		}
		if attempt == 3 {
			t.Fatal("a connection past admin.max_conns was served four times")
		}
	}

	var idle []net.Conn
	for _, src := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"} {
		c := dialSrc(t, g, src)
		if resp, _ := rawExchange(t, c, bufio.NewReader(c), healthzRequest); resp.StatusCode != http.StatusOK {
			t.Fatalf("idle-to-be from %s: %s", src, resp.Status)
		}
		idle = append(idle, c)
	}
	eventually(t, "four idle admin connections", func() bool { return adminIdle(g) == 4 })
	c := dialSrc(t, g, "127.0.0.4")
	if resp, _ := rawExchange(t, c, bufio.NewReader(c), healthzRequest); resp.StatusCode != http.StatusOK {
		t.Fatalf("newcomer with all four idle: %s", resp.Status)
	}
	if err := endsCleanly(idle[0], bufio.NewReader(idle[0])); err != nil {
		t.Errorf("the longest-idle connection: %v, want it closed", err)
	}
}

// TestAdminChunkedWithContentLengthCloses: a request with both
// Content-Length and Transfer-Encoding is answered and its connection
// closed (RFC 9112 section 6.1): the request after it, which may have been
// smuggled, is never read. Two plain requests in one write both get
// answers (keep-alive still works). Fails before this commit: the second
// request was answered.
func TestAdminChunkedWithContentLengthCloses(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})

	c := dialSrc(t, g, "127.0.0.1")
	br := bufio.NewReader(c)
	smuggle := "GET /healthz HTTP/1.1\r\nHost: edgemux.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		"GET /debug/registry HTTP/1.1\r\nHost: edgemux.test\r\n\r\n"
	resp, body := rawExchange(t, c, br, smuggle)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ok"`) || !resp.Close {
		t.Errorf("first request: %s close=%v %q", resp.Status, resp.Close, body)
	}
	if err := endsCleanly(c, br); err != nil {
		t.Fatalf("after a request with Content-Length and Transfer-Encoding: %v, want the connection closed", err)
	}

	c = dialSrc(t, g, "127.0.0.1")
	br = bufio.NewReader(c)
	resp, _ = rawExchange(t, c, br, healthzRequest+"GET /debug/registry HTTP/1.1\r\nHost: edgemux.test\r\n\r\n")
	second, body := readResponse(t, br)
	if resp.StatusCode != http.StatusOK || resp.Close || second.StatusCode != http.StatusOK || !strings.Contains(body, `"slots"`) {
		t.Errorf("pipelined plain requests: %s close=%v, then %s %q", resp.Status, resp.Close, second.Status, body)
	}
}
