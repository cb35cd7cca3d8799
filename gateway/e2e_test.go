package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

// TestOnePortEndToEnd: on one port at once, private-protocol devices
// publish and subscribe through the bus, an HTTP client reads /metrics, a
// garbage client lands in quarantine, and a TLS client is forwarded by SNI
// to a backend with its ClientHello intact. Under every dispatch policy:
// inline runs the workers on the loops themselves.
func TestOnePortEndToEnd(t *testing.T) {
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) { testOnePort(t, policy) })
	}
}

func testOnePort(t *testing.T, policy string) {
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend saw %s %s", r.Method, r.URL.Path)
	}))
	t.Cleanup(backend.Close)

	cfg := testConfig(t)
	cfg.Routes = append([]config.Route{{
		Match:   config.Match{Proto: "tls", SNI: "*.legacy.test"},
		Action:  "forward",
		Backend: strings.TrimPrefix(backend.URL, "https://"),
	}}, cfg.Routes...)
	cfg.Dispatch.Policy = policy
	cfg.Normalize()
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Devices: one subscribes with a wildcard, two publish.
	sub, err := private.Dial(ctx, addr, "dashboard-1", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Subscribe("plant/+/temp"); err != nil {
		t.Fatal(err)
	}
	const perDevice = 50
	for d := range 2 {
		dev, err := private.Dial(ctx, addr, fmt.Sprintf("sensor-%d", d), private.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		for i := range perDevice {
			if err := dev.Publish(fmt.Sprintf("plant/line%d/temp", d), []byte(fmt.Sprint(i)), true); err != nil {
				t.Fatal(err)
			}
		}
		if err := dev.Publish("plant/line0/pressure", []byte("1.2"), true); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	for n := 0; n < 2*perDevice; n++ {
		select {
		case m := <-sub.Messages():
			if m.Src != "private" {
				t.Fatalf("delivery from %q", m.Src)
			}
			if want := fmt.Sprint(got[m.Topic]); string(m.Data) != want {
				t.Fatalf("%s: got %q, want %q (order or loss)", m.Topic, m.Data, want)
			}
			got[m.Topic]++
		case <-ctx.Done():
			t.Fatalf("deliveries: got %v", got)
		}
	}
	if v, ok := g.Bus().Get("plant/line0/pressure"); !ok || string(v.Payload) != "1.2" {
		t.Fatalf("last value cache: %+v %v", v, ok)
	}

	// Garbage lands in quarantine and is closed.
	junk := dial(t, g)
	junk.Write([]byte("\x00\x01garbage that is no protocol at all\r\n"))
	junk.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(junk); err != nil {
		t.Fatalf("quarantined connection was not closed cleanly: %v", err)
	}
	eventually(t, "the quarantine record", func() bool {
		return g.Book().Stats().Reasons["no-match"] == 1
	})

	// TLS with a matching SNI reaches the backend through the gateway.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "plc.legacy.test"},
		DialContext:     (&netDialer{addr}).DialContext,
	}}
	resp, err := client.Get("https://plc.legacy.test/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "backend saw GET /status" {
		t.Fatalf("forwarded response %q", body)
	}

	// And /metrics tells the story.
	m := httpGet(t, g, "/metrics")
	for _, series := range []string{
		`edgemux_classified_total{action="handle",protocol="private"}`,
		`edgemux_classified_total{action="forward",protocol="tls"}`,
		`edgemux_quarantine_total{reason="no-match"}`,
		`edgemux_forwarded_total`,
	} {
		if v := metric(m, series); v == "" || v == "0" {
			t.Errorf("metric %s = %q", series, v)
		}
	}
	if v := metric(m, `edgemux_connections{protocol="private",state="active"}`); v != "3" {
		t.Errorf("private connections active = %q, want 3", v)
	}
}
