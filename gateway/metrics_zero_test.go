package gateway

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsAtZero scrapes /metrics right after start: every family the
// gateway defines is there before its first event, with the label values
// known up front at zero.
func TestMetricsAtZero(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	page := httpGet(t, g, "/metrics")
	for _, name := range gatewayFamilies(t, g) {
		if !strings.Contains(page, "\n"+name+"{") && !strings.Contains(page, "\n"+name+" ") &&
			!strings.Contains(page, "\n"+name+"_count") {
			t.Errorf("family %s missing at start-up", name)
		}
	}
	// The series alerts are written against, at zero (the scrape itself
	// is one admin connection, so it shows in none of these).
	for _, want := range []string{
		`edgemux_refused_total{reason="max_conns"} 0`,
		`edgemux_refused_total{reason="max_conns_per_ip"} 0`,
		`edgemux_refused_total{reason="admin_unauthorized"} 0`,
		`edgemux_closed_total{protocol="private",reason="idle"} 0`,
		`edgemux_closed_total{protocol="websocket",reason="peer_closed"} 0`,
		`edgemux_connections{protocol="private",state="active"} 0`,
		`edgemux_connections{protocol="unknown",state="quarantined"} 0`,
		`edgemux_handed_over_total{pool="private",protocol="private"} 0`,
		`edgemux_datagrams_total{class="coap"} 0`,
		`edgemux_classify_seconds_count{protocol="modbus"} 0`,
		`edgemux_classified_total{action="handle",protocol="private"} 0`,
	} {
		if !strings.Contains(page, "\n"+want+"\n") {
			t.Errorf("no %s at start-up", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", page)
	}
}

// gatewayFamilies names every metric family the gateway's own collectors
// describe: the metrics struct's fields and the scrape-time collectors.
// The upstream Modbus device families are left out: they have a series per
// configured device, and the default config has none.
func gatewayFamilies(t *testing.T, g *Gateway) []string {
	m := g.metrics
	cs := []prometheus.Collector{m.accepted, m.refused, m.classifiedN, m.classifyTime, m.handed, m.closedN,
		m.emfile, m.panics, m.backpressure, m.ringFull, m.forwarded, m.forwardErrors}
	// A collector field added to metrics must be listed above.
	collectorType := reflect.TypeFor[prometheus.Collector]()
	fields := 0
	for f := range reflect.TypeFor[metrics]().Fields() {
		if f.Type.Implements(collectorType) && f.Name != "reg" {
			fields++
		}
	}
	if fields != len(cs) {
		t.Fatalf("metrics has %d collector fields, the test lists %d", fields, len(cs))
	}
	cs = append(cs, &stateCollector{g: g}, udpCollector{g: g}, rudpCollector{g: g}, stageCollector{h: g.stages})
	ch := make(chan *prometheus.Desc, 256)
	for _, c := range cs {
		c.Describe(ch)
	}
	close(ch)
	nameRE := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for d := range ch {
		name := nameRE.FindStringSubmatch(d.String())[1]
		// Per-device families have a series per configured upstream
		// device, and the test config has none.
		if !strings.HasPrefix(name, "edgemux_modbus_device_") && !strings.HasPrefix(name, "edgemux_modbus_poll_") {
			names = append(names, name)
		}
	}
	return names
}

// TestRefusedReasonsListed keeps refusedReasons whole: every reason the
// sources count a refusal under (a literal passed to refused, refuse or
// deny, set as reason, or returned by the admission check) is in it.
func TestRefusedReasonsListed(t *testing.T) {
	uses := regexp.MustCompile(`refused\.WithLabelValues\("(\w+)"\)|\.refuse\([^,]+, [^,]+, "(\w+)"|\.deny\(w, [^,]+, "(\w+)"|reason = [^,]+, "(\w+)"`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var reasons []string
		for _, m := range uses.FindAllStringSubmatch(string(src), -1) {
			reasons = append(reasons, strings.Join(m[1:], ""))
		}
		if f == "admission.go" {
			for _, m := range regexp.MustCompile(`return "(\w+)"`).FindAllStringSubmatch(string(src), -1) {
				reasons = append(reasons, m[1])
			}
		}
		for _, r := range reasons {
			found++
			if !slices.Contains(refusedReasons, r) {
				t.Errorf("%s counts refusals as %q, which refusedReasons lacks", f, r)
			}
		}
	}
	if found < len(refusedReasons) {
		t.Errorf("found %d reasons in the sources, refusedReasons lists %d: the patterns above miss some", found, len(refusedReasons))
	}
}
