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

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
)

// dashSizes are the screens the dashboard is laid out for: a laptop and a
// wall screen.
var dashSizes = []struct{ w, h int }{{1280, 800}, {1920, 1080}}

// TestBrowserDashboardSizes: at 1280x800 and 1920x1080, with a plant's
// worth of connections, topics and upstream Modbus devices on the page, no
// panel reaches past the window or scrolls sideways, the eight tiles never
// leave one alone on a row, the topics tile counts what the table holds
// (the gateway's own $SYS topic is not in it), and "capped" shows only
// when the table is. The devices table shows one device answering, one
// demoted and one unreachable. Element boxes are measured in the page, not
// pixels; the screenshots are written to $EDGEMUX_SCREENSHOT_DIR when set
// (that is how docs/dashboard-1280x800.png and -1920x1080.png are made).
func TestBrowserDashboardSizes(t *testing.T) {
	upstreamtest.Require(t)
	plc := upstreamtest.TCPDevice(t, 1)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nobody listens there: connection refused

	cfg := testConfig(t)
	poll := func(topic string) config.ModbusPoll {
		return config.ModbusPoll{Interval: 300 * time.Millisecond, Tags: []config.ModbusPollTag{{Topic: topic, Table: "holding", Address: 0, Type: "uint16"}}}
	}
	cfg.Modbus.Upstream = config.ModbusUpstream{
		Lines: []config.ModbusLine{{Name: "plc", Kind: "tcp", Address: plc}, {Name: "line2", Kind: "tcp", Address: deadAddr}},
		Devices: []config.ModbusDevice{
			{Name: "press1", Line: "plc", UnitID: 1, Timeout: 5 * time.Second, Poll: poll("plant/press1/count")},
			{Name: "meter7", Line: "plc", UnitID: 7, Timeout: 100 * time.Millisecond, ProbeEvery: time.Hour, Poll: poll("plant/meter7/power")},
			{Name: "dryer2", Line: "line2", UnitID: 1, DemoteAfter: 1000, Poll: poll("plant/dryer2/temp")},
		},
	}
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()
	page := openDashboard(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dashPopulate(t, ctx, g)

	for dev, state := range map[string]string{"press1": "ok", "meter7": "demoted", "dryer2": "disconnected"} {
		page.waitTrue(dev+" "+state, fmt.Sprintf(`[...document.querySelectorAll("#device-rows tr")].some(r =>
			r.dataset.device === %q && r.cells[2].textContent === %q)`, dev, state))
	}
	page.waitTrue("press1's last answer", `[...document.querySelectorAll("#device-rows tr")].some(r =>
		r.dataset.device === "press1" && r.cells[5].textContent.endsWith(" ago") && r.cells[3].textContent.endsWith(" ms"))`)
	page.waitTrue("meter7's timeouts", `[...document.querySelectorAll("#device-rows tr")].some(r =>
		r.dataset.device === "meter7" && /timeouts [1-9]/.test(r.cells[4].textContent))`)
	page.waitTrue("dryer2 never answered", `[...document.querySelectorAll("#device-rows tr")].some(r =>
		r.dataset.device === "dryer2" && r.cells[5].textContent === "never" && r.cells[3].textContent === "–")`)
	page.waitTrue("the polled value", `[...document.querySelectorAll("#topic-rows tr")].some(r =>
		r.dataset.topic === "plant/press1/count" && r.cells[1].textContent.startsWith('{"v":1000,"q":"good"'))`)
	page.waitTrue("several topics", `document.querySelectorAll("#topic-rows tr[data-topic]").length >= 14`)
	page.waitTrue("a quarantine sample", `document.getElementById("samples").innerText.includes("no-match")`)
	snapshots := 3
	if os.Getenv("EDGEMUX_SCREENSHOT_DIR") != "" {
		snapshots = 20 // a rate graph with some history for the docs
	}
	page.waitTrue("a few stats snapshots", fmt.Sprintf(`window.edgemuxDashboard.statsSeen >= %d`, snapshots))

	for _, size := range dashSizes {
		name := strconv.Itoa(size.w) + "x" + strconv.Itoa(size.h)
		page.call("Emulation.setDeviceMetricsOverride", map[string]any{
			"width": size.w, "height": size.h, "deviceScaleFactor": 1, "mobile": false}, nil)
		page.waitTrue(name+": the window's size", fmt.Sprintf(`innerWidth === %d && innerHeight === %d`, size.w, size.h))
		var problems []string
		if err := page.eval(dashLayoutProblems, &problems); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", name, p)
		}
		png := page.screenshot()
		if dir := os.Getenv("EDGEMUX_SCREENSHOT_DIR"); dir != "" {
			out := filepath.Join(dir, "dashboard-"+name+".png")
			if err := os.WriteFile(out, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot written to %s", out)
		}
	}

	// Past 500 topics the table is capped and says so; the tile still
	// counts every topic the page holds.
	dev := dashDevice(t, ctx, addr, "plc-many")
	for i := range 520 {
		if err := dev.Publish(fmt.Sprintf("bulk/tag%03d", i), []byte(strconv.Itoa(i)), true); err != nil {
			t.Fatal(err)
		}
	}
	page.waitTrue("the cap notice", `document.getElementById("topics-cap").textContent.includes("capped at 500")`)
	page.waitTrue("500 rows, the tile counting all", `document.querySelectorAll("#topic-rows tr[data-topic]").length === 500 &&
		document.getElementById("k-topics").textContent === new Intl.NumberFormat("en-US").format(window.edgemuxDashboard.topics.size)`)
}

// dashLayoutProblems is a JS expression: what is wrong with the layout at
// the window's current size, as a list of sentences (empty: nothing).
const dashLayoutProblems = `(() => {
	const out = [], W = document.documentElement.clientWidth;
	const boxes = [document.querySelector(".kpis"), ...document.querySelectorAll("main > section")];
	for (const el of boxes) {
		const r = el.getBoundingClientRect(), id = el.id || el.className;
		if (r.left < 0 || r.right > W + 0.5) out.push(id + " reaches past the window: " + r.left + ".." + r.right + " of " + W);
		if (el.scrollWidth > el.clientWidth + 1) out.push(id + " scrolls sideways: " + el.scrollWidth + " > " + el.clientWidth);
		for (const tb of el.querySelectorAll("table")) {
			const tr = tb.getBoundingClientRect();
			if (tr.right > r.right + 0.5) out.push(id + ": its table is clipped at " + r.right + " (table ends at " + tr.right + ")");
		}
	}
	if (document.documentElement.scrollWidth > W) out.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " > " + W);
	const rows = new Map();
	for (const k of document.querySelectorAll(".kpi")) {
		const top = Math.round(k.getBoundingClientRect().top);
		rows.set(top, (rows.get(top) || 0) + 1);
	}
	const counts = [...rows.values()];
	if (counts.length > 1 && counts.some((n) => n === 1)) out.push("a tile alone on a row: tiles per row " + counts.join(", "));
	if (counts.length > 1 && new Set(counts).size > 1) out.push("uneven rows of tiles: " + counts.join(", "));
	const shown = document.querySelectorAll("#topic-rows tr[data-topic]").length;
	const tile = document.getElementById("k-topics").textContent;
	if (tile !== String(shown)) out.push("the topics tile says " + tile + ", the table shows " + shown);
	const cap = document.getElementById("topics-cap").textContent;
	if (cap !== "") out.push("a cap notice with " + shown + " rows: " + cap);
	if (document.querySelectorAll("#device-rows tr[data-device]").length !== 3) out.push("the devices table does not show the 3 devices");
	return out;
})()`
