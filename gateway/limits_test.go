package gateway

import (
	"io"
	"net"
	"testing"
	"time"
)

func dialSrc(t *testing.T, g *Gateway, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the gateway closed c (EOF or reset).
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.ReadAll(c)
	return err == nil || !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestPerIPLimits: a source over max_sniffing_per_ip (or max_conns_per_ip)
// is refused at accept and counted; other sources are not affected.
func TestPerIPLimits(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxSniffingPerIP = 2
	cfg.Limits.MaxConnsPerIP = 3
	g := startGateway(t, cfg, Options{})
	dialSrc(t, g, "127.0.0.21")
	dialSrc(t, g, "127.0.0.21")
	eventually(t, "two sniffing", func() bool { return g.limits.stillSniffing() == 2 })
	over := dialSrc(t, g, "127.0.0.21")
	if !closedByPeer(over) {
		t.Fatal("third sniffing connection from one source was not refused")
	}
	other := dialSrc(t, g, "127.0.0.22")
	other.Write([]byte("GET /healthz HTTP/1.0\r\n\r\n"))
	b, _ := io.ReadAll(other)
	if len(b) == 0 || string(b[:12]) != "HTTP/1.0 200" {
		t.Fatalf("another source was affected: %q", b)
	}
	m := httpGet(t, g, "/metrics")
	if v := metric(m, `edgemux_refused_total{reason="max_sniffing_per_ip"}`); v != "1" {
		t.Fatalf("refused max_sniffing_per_ip = %q", v)
	}
}

// TestBannedSourceRefused: a source that keeps landing in quarantine is
// banned, and refused at accept while the ban lasts.
func TestBannedSourceRefused(t *testing.T) {
	cfg := testConfig(t)
	cfg.Quarantine.BanAfter = 3
	g := startGateway(t, cfg, Options{})
	for range 3 {
		c := dialSrc(t, g, "127.0.0.23")
		c.Write([]byte("\x01\x02 not a protocol \x03\x04\r\n"))
		if !closedByPeer(c) {
			t.Fatal("garbage was not closed")
		}
	}
	eventually(t, "the ban", func() bool { return g.Book().Stats().BansActive == 1 })
	c := dialSrc(t, g, "127.0.0.23")
	if !closedByPeer(c) {
		t.Fatal("banned source was not refused")
	}
	eventually(t, "the refusal count", func() bool { return g.Book().Stats().Refused >= 1 })
	// Others still get in.
	ok := dialSrc(t, g, "127.0.0.24")
	ok.Write([]byte("GET /healthz HTTP/1.0\r\n\r\n"))
	if b, _ := io.ReadAll(ok); len(b) == 0 {
		t.Fatal("an unbanned source was refused")
	}
}
