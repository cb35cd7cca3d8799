package gateway

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/protocols/private"
)

// TestBrowserDashboard opens the dashboard in headless chromium (driven
// over the DevTools protocol), has private-protocol devices publish, and
// waits for the values to appear in the page's topic table, live over the
// WebSocket. It then checks that data never becomes markup, and saves a
// screenshot (to $EDGEMUX_SCREENSHOT too when set; the README's come from
// TestBrowserDashboardSizes).
func TestBrowserDashboard(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	addr := g.Addr().String()
	page := openDashboard(t, addr)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	line1 := dashDevice(t, ctx, addr, "plc-line1")
	dashPublish(t, line1, map[string]string{"plant/line1/temp": "21.5"})
	page.waitTrue("plant/line1/temp = 21.5 from private", dashTopicCell("plant/line1/temp", "21.5", "private"))

	// A later value replaces it in place.
	dashPublish(t, line1, map[string]string{"plant/line1/temp": "21.7"})
	page.waitTrue("plant/line1/temp = 21.7", dashTopicCell("plant/line1/temp", "21.7", "private"))

	dashPopulate(t, ctx, g)
	page.waitTrue("several topics", `document.querySelectorAll("#topic-rows tr[data-topic]").length >= 10`)
	page.waitTrue("a quarantine sample", `document.getElementById("samples").innerText.includes("no-match")`)
	snapshots := 3
	if os.Getenv("EDGEMUX_SCREENSHOT") != "" {
		snapshots = 20 // a rate graph with some history for the docs
	}
	page.waitTrue("a few stats snapshots", fmt.Sprintf(`window.edgemuxDashboard.statsSeen >= %d`, snapshots))

	png := page.screenshot()
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv("EDGEMUX_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot written to %s", out)
	}

	// Data is text, never markup: a hostile topic and value show up
	// verbatim and create no element.
	const evilTopic = `xss/<img src=x onerror="window.pwned=1">`
	const evilValue = `<script>window.pwned=1</script><b>bold</b>`
	dashPublish(t, line1, map[string]string{evilTopic: evilValue})
	page.waitTrue("the hostile topic as text", dashTopicCell(evilTopic, evilValue, "private"))
	var injected bool
	if err := page.eval(`!!(window.pwned || document.querySelector("#topic-rows img, #topic-rows script, #topic-rows b"))`, &injected); err != nil || injected {
		t.Fatalf("data became markup: injected=%v err=%v", injected, err)
	}
}

// TestBrowserDashboardReconnects: the page notices that the gateway went
// away, says so, and picks up the live feed again when a gateway is back
// on the same address.
func TestBrowserDashboardReconnects(t *testing.T) {
	cfg := testConfig(t)
	first := startGateway(t, cfg, Options{})
	addr := first.Addr().String()
	page := openDashboard(t, addr)

	first.Close()
	page.waitTrue("the disconnected status", `document.getElementById("status").textContent.startsWith("disconnected")`)

	cfg.Listen = addr
	startGateway(t, cfg, Options{})
	page.waitTrue("the connected status again", `document.getElementById("status").textContent === "connected"`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dashPublish(t, dashDevice(t, ctx, addr, "plc-after-restart"), map[string]string{"plant/line3/temp": "19.5"})
	page.waitTrue("a value published after the restart", dashTopicCell("plant/line3/temp", "19.5", "private"))
}

// openDashboard starts chromium on the gateway's dashboard and waits until
// its script runs (so the CSP hashes fit) and its WebSocket is up (so
// connect-src 'self' lets it through).
func openDashboard(t *testing.T, addr string) *cdpPage {
	t.Helper()
	page := startBrowser(t).page(t)
	page.navigate("http://"+addr+"/", 1600, 1000)
	page.waitTrue("the dashboard script", `!!(window.edgemuxDashboard && window.edgemuxDashboard.ready)`)
	page.waitTrue("the connected status", `document.getElementById("status").textContent === "connected"`)
	return page
}

// dashTopicCell is a JS expression: the topic table has a row for topic whose
// value cell reads value and whose source cell reads src.
func dashTopicCell(topic, value, src string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#topic-rows tr")].some(r =>
		r.dataset.topic === %s && r.cells[1].textContent === %s && r.cells[2].textContent === %s)`,
		strconv.Quote(topic), strconv.Quote(value), strconv.Quote(src))
}

func dashDevice(t *testing.T, ctx context.Context, addr, id string) *private.Client {
	t.Helper()
	c, err := private.Dial(ctx, addr, id, private.ClientOptions{})
	if err != nil {
		t.Fatalf("device %s: %v", id, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dashPublish(t *testing.T, c *private.Client, values map[string]string) {
	t.Helper()
	for topic, v := range values {
		if err := c.Publish(topic, []byte(v), true); err != nil {
			t.Fatalf("publish %s: %v", topic, err)
		}
	}
}

// dashPopulate makes the page look like a plant: devices on two lines and a
// cell tower, an HMI panel on the WebSocket, and a few connections that
// land in quarantine from other source addresses (so no ban touches the
// devices on 127.0.0.1).
func dashPopulate(t *testing.T, ctx context.Context, g *Gateway) {
	t.Helper()
	addr := g.Addr().String()
	motor := dashDevice(t, ctx, addr, "plc-line1b")
	dashPublish(t, motor, map[string]string{
		"plant/line1/pressure":   "1.013",
		"plant/line1/motor/amps": "12.4",
		"plant/line1/status":     "running",
	})
	// A motor that reports its speed ten times a second, so the rate
	// graph and the row highlight have something to show.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			rpm := 1480 + (i*37)%23 - 11
			if motor.Publish("plant/line1/motor/rpm", []byte(strconv.Itoa(rpm)), true) != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-stopped })
	dashPublish(t, dashDevice(t, ctx, addr, "plc-line2"), map[string]string{
		"plant/line2/temp":     "23.8",
		"plant/line2/humidity": "41.2",
		"plant/line2/status":   "maintenance",
		"plant/line2/alarms":   `["filter clogged","door open"]`,
	})
	dashPublish(t, dashDevice(t, ctx, addr, "rtu-cell7"), map[string]string{
		"tower/cell7/battery": `{"v":12.6,"soc":87}`,
		"tower/cell7/door":    "closed",
		"tower/cell7/rssi":    "-71",
	})
	hmi, _, err := (&websocket.Dialer{Subprotocols: []string{"edgemux.v1"}, HandshakeTimeout: 10 * time.Second}).
		DialContext(ctx, "ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatalf("HMI WebSocket: %v", err)
	}
	t.Cleanup(func() { hmi.Close() })
	if err := hmi.WriteJSON(map[string]any{"op": "pub", "topic": "hmi/panel3/setpoint", "data": 22.0}); err != nil {
		t.Fatal(err)
	}
	for i, junk := range []string{
		"\x00\x01\x02garbage that is no protocol at all\r\n",
		"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
		"\xff\xfb\x1f\xff\xfb\x20\xff\xfb\x18",
	} {
		c := dashDialFrom(t, addr, fmt.Sprintf("127.0.0.%d", i+2))
		c.Write([]byte(junk))
	}
}

// dashDialFrom connects to addr from a chosen loopback source address.
func dashDialFrom(t *testing.T, addr, src string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
