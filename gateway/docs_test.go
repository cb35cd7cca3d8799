package gateway

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgemux/edgemux/protocols/coap"
	"github.com/edgemux/edgemux/protocols/modbus"
	"github.com/edgemux/edgemux/protocols/modbus/poll"
	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/protocols/websocket"
)

// The documents users read, relative to this package's directory.
func userDocs(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../README.md", "../docs/*.md", "../protocols/*/README.md", "../protocols/*/SPEC.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v: run from the gateway package", files)
	}
	return files
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricLabels is every edgemux_* series the gateway can export, with its
// label names: what the metrics struct and the custom collectors describe.
// Described, not gathered: a vector with no series yet is still a metric.
func metricLabels(t *testing.T) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 256)
	g := startGateway(t, testConfig(t), Options{})
	v := reflect.ValueOf(g.metrics).Elem()
	collectorType := reflect.TypeFor[prometheus.Collector]()
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.Type().Implements(collectorType) || f.Type() == reflect.TypeFor[*prometheus.Registry]() {
			continue
		}
		// The fields are unexported; reading them is fine in the package's own test.
		c := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(prometheus.Collector)
		c.Describe(ch)
	}
	(&stateCollector{g: g}).Describe(ch)
	udpCollector{g: g}.Describe(ch)
	rudpCollector{g: g}.Describe(ch)
	stageCollector{h: g.stages}.Describe(ch)
	northCollector{g: g}.Describe(ch)
	clusterCollector{g: g}.Describe(ch)
	close(ch)
	descRe := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)
	out := map[string][]string{}
	for d := range ch {
		sm := descRe.FindStringSubmatch(d.String())
		if sm == nil {
			t.Fatalf("cannot read %s", d)
		}
		var labels []string
		if sm[2] != "" {
			labels = strings.Split(sm[2], ",")
		}
		out[sm[1]] = labels
	}
	return out
}

// TestDocsNameRealMetrics: every edgemux_* name in the user docs is a
// series the gateway exports, and the label names the docs give it
// (`name{a,b}` or `name{a="x"}`) are its labels.
func TestDocsNameRealMetrics(t *testing.T) {
	known := metricLabels(t)
	if len(known) < 20 {
		t.Fatalf("only %d metrics described: %v", len(known), known)
	}
	notMetrics := map[string]bool{"edgemux_operator": true} // the dashboard's cookie (access.go)
	mention := regexp.MustCompile(`edgemux_[a-z_]+[a-z](\{[^}]*\})?`)
	labelName := regexp.MustCompile(`^\s*([a-z_]+)`)
	seen := 0
	for _, path := range userDocs(t) {
		for _, sm := range mention.FindAllStringSubmatch(readDoc(t, path), -1) {
			name := strings.SplitN(sm[0], "{", 2)[0]
			if notMetrics[name] {
				continue
			}
			seen++
			labels, ok := known[name]
			if !ok {
				t.Errorf("%s: %s is no metric of the gateway", path, sm[0])
				continue
			}
			if sm[1] == "" {
				continue
			}
			for _, part := range strings.Split(strings.Trim(sm[1], "{}"), ",") {
				l := labelName.FindStringSubmatch(part)
				if l == nil || !slices.Contains(labels, l[1]) {
					t.Errorf("%s: %s: %s has labels %v", path, sm[0], name, labels)
				}
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found only %d metric mentions in the docs", seen)
	}
}

// TestDocsNameRealSources: the bus sources the private protocol's SPEC.md
// lists for a message's src are the names the handlers publish under,
// and each handler's name is listed.
func TestDocsNameRealSources(t *testing.T) {
	spec := readDoc(t, "../protocols/private/SPEC.md")
	row := regexp.MustCompile(`(?m)^\| m +\| src +\|.*$`).FindString(spec)
	if row == "" {
		t.Fatal("SPEC.md has no src row in the PUB/MSG table")
	}
	var listed []string
	for _, sm := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(row, -1) {
		listed = append(listed, sm[1])
	}
	sources := []string{private.Source, websocket.Source, modbus.Source, poll.Source, coap.Source}
	for _, s := range sources {
		if !slices.Contains(listed, s) {
			t.Errorf("SPEC.md's src row %v lacks %q, a source the gateway publishes under", listed, s)
		}
	}
	for _, s := range listed {
		if !slices.Contains(sources, s) {
			t.Errorf("SPEC.md's src row lists %q, which no handler publishes under (%v)", s, sources)
		}
	}
}

// TestDocsNameRealWebSocketCodes: every WebSocket error code the docs show
// ({"op":"error","code":"..."}) is one the server sends.
func TestDocsNameRealWebSocketCodes(t *testing.T) {
	codes := webSocketCodes(t)
	seen := 0
	codeRe := regexp.MustCompile(`"code"\s*:\s*"([^"]*)"`)
	for _, path := range userDocs(t) {
		for _, sm := range codeRe.FindAllStringSubmatch(readDoc(t, path), -1) {
			seen++
			if !slices.Contains(codes, sm[1]) {
				t.Errorf("%s: error code %q is not one the WebSocket server sends (%v)", path, sm[1], codes)
			}
		}
	}
	if seen < 3 {
		t.Fatalf("found only %d error codes in the docs", seen)
	}
}

// webSocketCodes reads the Code* constants of protocols/websocket.
func webSocketCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../protocols/websocket/pubsub.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(n.Name, "Code") && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					codes = append(codes, v)
				}
			}
		}
	}
	if len(codes) < 5 {
		t.Fatalf("found only %v in pubsub.go", codes)
	}
	return codes
}
