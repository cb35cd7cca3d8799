package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const examplePath = "../examples/edgemux.yaml"

// withoutLines drops the line index so parsed and built configs compare.
func withoutLines(c Config) Config {
	c.Lines = nil
	return c
}

func mustParse(t testing.TB, doc string) Config {
	t.Helper()
	cfg, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(%q): %v", doc, err)
	}
	return cfg
}

func TestDefaultYAMLMatchesDefaults(t *testing.T) {
	cfg := mustParse(t, string(DefaultYAML))
	if got, want := withoutLines(cfg), withoutLines(Defaults()); !reflect.DeepEqual(got, want) {
		t.Fatalf("default.yaml and Defaults() drifted apart:\n yaml: %+v\n code: %+v", got, want)
	}
}

func TestDefaultsValidate(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("Defaults().Validate() = %v", err)
	}
}

// TestDefaultYAMLCommentsEveryKey keeps the annotated file annotated.
func TestDefaultYAMLCommentsEveryKey(t *testing.T) {
	for i, line := range strings.Split(string(DefaultYAML), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if !strings.Contains(line, " # ") {
			t.Errorf("default.yaml line %d has no comment: %q", i+1, line)
		}
	}
}

func TestDefaultsAreFresh(t *testing.T) {
	a := Defaults()
	a.Pools["private"] = Pool{Workers: 99}
	a.Routes[0].Action = "forward"
	b := Defaults()
	if b.Pools["private"].Workers != 2 || b.Routes[0].Action != "handle" {
		t.Fatal("Defaults() shares maps or slices between calls")
	}
}

func TestParseEmptyGivesDefaults(t *testing.T) {
	for _, doc := range []string{"", "\n", "# only a comment\n", "---\n"} {
		cfg := mustParse(t, doc)
		if !reflect.DeepEqual(withoutLines(cfg), withoutLines(Defaults())) {
			t.Errorf("Parse(%q) != Defaults()", doc)
		}
	}
}

func TestParseMerge(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(t *testing.T, c Config)
	}{
		{"section keeps unset fields", "limits:\n  max_conns: 500\n", func(t *testing.T, c Config) {
			want := Defaults().Limits
			want.MaxConns = 500
			if c.Limits != want {
				t.Errorf("limits = %+v, want %+v", c.Limits, want)
			}
		}},
		{"listed pool keeps its default fields", "pools:\n  private:\n    workers: 8\n", func(t *testing.T, c Config) {
			p := c.Pools["private"]
			if p.Workers != 8 || p.IdleTimeout != 5*time.Minute || p.Pattern != "steady" {
				t.Errorf("private pool = %+v", p)
			}
			if _, ok := c.Pools["quarantine"]; !ok {
				t.Error("unlisted default pool quarantine was dropped")
			}
		}},
		{"new pool starts from zero", "pools:\n  tls:\n    workers: 3\n", func(t *testing.T, c Config) {
			p := c.Pools["tls"]
			want := Pool{Workers: 3, Protocols: []string{"tls"}}
			if !reflect.DeepEqual(p, want) {
				t.Errorf("tls pool = %+v, want %+v", p, want)
			}
			if len(c.Pools) != 6 {
				t.Errorf("pools = %v, want the five defaults and tls", c.Pools)
			}
		}},
		{"null removes a default pool", "pools:\n  private: ~\n", func(t *testing.T, c Config) {
			if _, ok := c.Pools["private"]; ok {
				t.Error("pool private still there")
			}
		}},
		{"aliased pool", "pools:\n  modbus: &p {workers: 5}\n  coap: *p\n", func(t *testing.T, c Config) {
			if c.Pools["coap"].Workers != 5 || !slices.Equal(c.Pools["coap"].Protocols, []string{"coap"}) {
				t.Errorf("coap pool = %+v", c.Pools["coap"])
			}
		}},
		{"routes replace the defaults", "routes:\n  - match: {proto: '*'}\n    action: quarantine\n", func(t *testing.T, c Config) {
			want := []Route{{Match: Match{Proto: "*"}, Action: "quarantine"}}
			if !reflect.DeepEqual(c.Routes, want) {
				t.Errorf("routes = %+v, want %+v", c.Routes, want)
			}
		}},
		{"forward gets the default dial timeout", "routes:\n  - match: {proto: tls}\n    action: forward\n    backend: a:1\n", func(t *testing.T, c Config) {
			if c.Routes[0].DialTimeout != DefaultDialTimeout {
				t.Errorf("dial_timeout = %v", c.Routes[0].DialTimeout)
			}
		}},
		{"handle gets the protocol's pool", "routes:\n  - match: {proto: coap}\n    action: handle\n", func(t *testing.T, c Config) {
			if c.Routes[0].Pool != "coap" {
				t.Errorf("pool = %q", c.Routes[0].Pool)
			}
		}},
		{"handle any keeps no pool", "routes:\n  - match: {proto: '*'}\n    action: handle\n", func(t *testing.T, c Config) {
			if c.Routes[0].Pool != "" {
				t.Errorf("pool = %q", c.Routes[0].Pool)
			}
		}},
		{"websocket section keeps unset fields", "websocket:\n  path: /live\n  allowed_origins: ['*']\n", func(t *testing.T, c Config) {
			want := Defaults().WebSocket
			want.Path, want.AllowedOrigins = "/live", []string{"*"}
			if !reflect.DeepEqual(c.WebSocket, want) {
				t.Errorf("websocket = %+v, want %+v", c.WebSocket, want)
			}
		}},
		{"empty origin list is nil", "websocket:\n  allowed_origins: []\n", func(t *testing.T, c Config) {
			if c.WebSocket.AllowedOrigins != nil {
				t.Errorf("allowed_origins = %#v, want nil", c.WebSocket.AllowedOrigins)
			}
		}},
		{"websocket route before admin", "", func(t *testing.T, c Config) {
			ws := slices.IndexFunc(c.Routes, func(r Route) bool { return r.Match.Proto == "websocket" })
			admin := slices.IndexFunc(c.Routes, func(r Route) bool { return r.Action == "admin" })
			if ws < 0 || ws > admin || c.Routes[ws].Pool != "websocket" {
				t.Errorf("routes = %+v, want websocket (pool websocket) before admin", c.Routes)
			}
		}},
		{"bools", "admin:\n  enabled: false\nudp: {enabled: false}\npin_cpus: true\n", func(t *testing.T, c Config) {
			if c.Admin.Enabled || c.UDP.Enabled || !c.PinCPUs || c.Admin.MaxConns != 64 {
				t.Errorf("admin %+v udp %+v pin %v", c.Admin, c.UDP, c.PinCPUs)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, mustParse(t, tt.doc)) })
	}
}

func TestParseDurations(t *testing.T) {
	tests := []struct {
		doc  string
		want time.Duration
	}{
		{"sniff:\n  deadline: 1500ms\n", 1500 * time.Millisecond},
		{"sniff:\n  deadline: 1m30s\n", 90 * time.Second},
		{"sniff:\n  deadline: \"2s\"\n", 2 * time.Second},
		{"sniff:\n  deadline: 0s\n", 0},
		{"sniff:\n  deadline: -1s\n", -time.Second},
	}
	for _, tt := range tests {
		if got := mustParse(t, tt.doc).Sniff.Deadline; got != tt.want {
			t.Errorf("Parse(%q).Sniff.Deadline = %v, want %v", tt.doc, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		sentinel error
		contains []string
	}{
		{"unknown top-level key", "listen: :1\nlimit: {}\n", ErrDecode, []string{"line 2", "limit"}},
		{"unknown nested key", "limits:\n  max_conns: 1\n  max_con: 5\n", ErrDecode, []string{"line 3", "max_con"}},
		{"unknown pool key", "pools:\n  private:\n    worker: 5\n", ErrDecode, []string{"line 3", "worker"}},
		{"unknown route key", "routes:\n  - match: {proto: http, host: x}\n    action: admin\n", ErrDecode, []string{"line 2", "host"}},
		{"bare number duration", "sniff:\n  deadline: 3\n", ErrDecode, []string{"line 2"}},
		{"bad duration", "sniff:\n  deadline: 3 seconds\n", ErrDecode, []string{"line 2"}},
		{"wrong type", "limits:\n  max_conns: many\n", ErrDecode, []string{"line 2"}},
		{"syntax", "limits:\n  max_conns: [\n", ErrDecode, nil},
		{"not a mapping", "- a\n- b\n", ErrDecode, nil},
		{"duplicate key", "loops: 1\nloops: 2\n", ErrDecode, []string{"loops"}},
		{"two documents", "loops: 1\n---\nloops: 2\n", ErrMultiDoc, []string{"line 2"}},
		{"too large", strings.Repeat("#", MaxFileSize+1), ErrTooLarge, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("Parse error = %v, want %v", err, tt.sentinel)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestLines(t *testing.T) {
	doc := `listen: :5020
limits:
  max_conns: 7
pools:
  private:
    workers: 3
routes:
  - match: {proto: private}
    action: handle
  - match:
      proto: tls
    action: forward
    backend: a:1
`
	cfg := mustParse(t, doc)
	exact := map[string]int{
		"listen": 1, "limits": 2, "limits.max_conns": 3, "pools.private": 5,
		"pools.private.workers": 6, "routes": 7, "routes[0]": 8, "routes[0].match.proto": 8,
		"routes[1]": 10, "routes[1].match.proto": 11, "routes[1].backend": 13,
	}
	for path, want := range exact {
		if got := cfg.Lines[path]; got != want {
			t.Errorf("Lines[%q] = %d, want %d", path, got, want)
		}
	}
	nearest := map[string]int{
		"routes[1].dial_timeout": 10, "pools.private.pattern": 5, "limits.max_input": 2,
		"sniff.budget": 0, "": 0, "routes[9].pool": 7,
	}
	for path, want := range nearest {
		if got := cfg.LineOf(path); got != want {
			t.Errorf("LineOf(%q) = %d, want %d", path, got, want)
		}
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad(t *testing.T) {
	good := writeFile(t, "good.yaml", "limits:\n  max_conns: 100\n  max_conns_per_ip: 10\n  max_sniffing: 50\n  max_sniffing_per_ip: 5\n")
	cfg, err := Load(good)
	if err != nil || cfg.Limits.MaxConns != 100 {
		t.Fatalf("Load(good) = %+v, %v", cfg.Limits, err)
	}

	tests := []struct {
		name     string
		path     string
		sentinel error
		contains string
	}{
		{"missing", filepath.Join(t.TempDir(), "nope.yaml"), os.ErrNotExist, "nope.yaml"},
		{"too large", writeFile(t, "big.yaml", strings.Repeat("#", MaxFileSize+1)), ErrTooLarge, "big.yaml"},
		{"undecodable", writeFile(t, "bad.yaml", "loops: 1\nbogus: 2\n"), ErrDecode, "bad.yaml"},
		{"invalid", writeFile(t, "inv.yaml", "loops: 1\nlimits:\n  max_conns: 0\n"), ErrInvalid, "inv.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.path)
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("Load error = %v, want %v naming %s", err, tt.sentinel, tt.contains)
			}
		})
	}
	_, err = Load(tests[3].path)
	if !strings.Contains(err.Error(), "limits.max_conns: must be between 1 and 1000000, not 0 (line 3)") {
		t.Errorf("invalid file error lacks the field and line: %v", err)
	}
}

func TestExampleFile(t *testing.T) {
	cfg, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutLines(cfg), withoutLines(Defaults())) {
		t.Error("examples/edgemux.yaml (examples commented out) differs from the defaults")
	}
}

// exampleLine matches a commented-out example line: one "# " after the
// indentation, not the "## " of prose.
var exampleLine = regexp.MustCompile(`(?m)^(\s*)# `)

// TestExampleFileExamples switches the commented examples on and checks
// they form a valid config that does what their comments say.
func TestExampleFileExamples(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	on := exampleLine.ReplaceAllString(string(data), "$1")
	cfg, err := Parse([]byte(on))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("examples do not validate:\n%v", err)
	}
	if p := cfg.Pools["field"]; !slices.Equal(p.Protocols, []string{"modbus", "coap"}) {
		t.Errorf("mixed pool = %+v", p)
	}
	sni := Route{Match: Match{Proto: "tls", SNI: "*.legacy.example"}, Action: "forward",
		Backend: "127.0.0.1:8443", DialTimeout: 2 * time.Second}
	source := Route{Match: Match{Proto: "modbus", Source: "10.20.0.0/16"}, Action: "handle", Pool: "field"}
	if !slices.Contains(cfg.Routes, sni) || !slices.Contains(cfg.Routes, source) {
		t.Errorf("routes = %+v, want the SNI forward and the source-restricted route", cfg.Routes)
	}
}

// TestExampleFileCopiesDefault keeps examples/edgemux.yaml a superset of
// default.yaml: every line of the defaults appears in it, in order.
func TestExampleFileCopiesDefault(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	example := strings.Split(string(data), "\n")
	next := 0
	for _, line := range strings.Split(string(DefaultYAML), "\n") {
		i := slices.Index(example[next:], line)
		if i < 0 {
			t.Fatalf("examples/edgemux.yaml lacks (or reorders) default.yaml's line %q", line)
		}
		next += i + 1
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(DefaultYAML); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	cfg := mustParse(b, string(DefaultYAML))
	b.ReportAllocs()
	for b.Loop() {
		if err := cfg.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
