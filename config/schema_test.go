package config

import (
	"errors"
	"strings"
	"testing"
)

// goWords are what a message about the file must never show: Go's type
// names and yaml.v3's own phrasing of them.
var goWords = []string{"config.", "time.Duration", "[]", "!!", "cannot unmarshal", "not found in type", "int64"}

// parseProblems parses doc and returns its error's lines.
func parseProblems(t *testing.T, doc string) []string {
	t.Helper()
	_, err := Parse([]byte(doc))
	if err == nil {
		t.Fatalf("Parse(%q) accepted it", doc)
	}
	if !errors.Is(err, ErrDecode) {
		t.Errorf("Parse(%q) error %v is not ErrDecode", doc, err)
	}
	for _, w := range goWords {
		if strings.Contains(err.Error(), w) {
			t.Errorf("Parse(%q) error names %q: %v", doc, w, err)
		}
	}
	return strings.Split(err.Error(), "\n")
}

func TestSchemaUnknownKeys(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"sniff:\n  buget: 512\n", "sniff.buget: unknown key; did you mean sniff.budget? (line 2)"},
		{"limits:\n  max-conns: 5\n", "limits.max-conns: unknown key; did you mean limits.max_conns? (line 2)"},
		{"lisen: :1\n", "lisen: unknown key; did you mean listen? (line 1)"},
		{"pools:\n  private:\n    worker: 5\n", "pools.private.worker: unknown key; did you mean pools.private.workers? (line 3)"},
		{"routes:\n  - match: {proto: http, host: x}\n    action: admin\n",
			"routes[0].match.host: unknown key; routes[0].match takes proto, sni, source (line 2)"},
		{"dispatch:\n  zzz: 1\n", "dispatch.zzz: unknown key; dispatch takes policy, window, ring_size, spin, history, lend_below (line 2)"},
		// In a list item, the path carries the index.
		{"modbus:\n  tags:\n    - {topic: a, table: input, address: 0, type: int16}\n    - {topic: b, table: input, address: 1, type: int16}\n    - tpoic: c\n      table: input\n",
			"modbus.tags[2].tpoic: unknown key; did you mean modbus.tags[2].topic? (line 5)"},
		{"modbus:\n  upstream:\n    devices:\n      - name: m\n        poll:\n          tags:\n            - {topic: a, tabel: holding}\n",
			"modbus.upstream.devices[0].poll.tags[0].tabel: unknown key; did you mean modbus.upstream.devices[0].poll.tags[0].table? (line 7)"},
	}
	for _, tt := range tests {
		if got := parseProblems(t, tt.doc); len(got) != 1 || got[0] != tt.want {
			t.Errorf("Parse(%q):\n got %q\nwant %q", tt.doc, got, tt.want)
		}
	}
}

func TestSchemaWrongKinds(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"sniff:\n  deadline: 3sec\n", `sniff.deadline: "3sec" is not a duration (e.g. 500ms, 3s) (line 2)`},
		{"sniff:\n  deadline: 3\n", `sniff.deadline: 3 is not a duration (e.g. 500ms, 3s): a number needs a unit (ms, s, m, h) (line 2)`},
		{"limits:\n  max_conns: many\n", `limits.max_conns: "many" is not a whole number (line 2)`},
		{"limits:\n  max_conns: 1.5\n", `limits.max_conns: 1.5 is not a whole number (line 2)`},
		{"limits:\n  max_conns: \"100\"\n", `limits.max_conns: "100" is not a whole number: write it without quotes (line 2)`},
		{"pin_cpus: 'true'\n", `pin_cpus: "true" is not true or false: write it without quotes (line 1)`},
		{"pin_cpus: maybe\n", `pin_cpus: "maybe" is not true or false (line 1)`},
		{"limits: [1, 2]\n", `limits: expected a section of keys (max_conns, max_conns_per_ip, max_sniffing, ...), not a list (line 1)`},
		{"pools: [private]\n", `pools: expected a mapping of name: value, not a list (line 1)`},
		{"routes: {a: 1}\n", `routes: expected a list (lines starting with -, or [a, b]), not a mapping (key: value) (line 1)`},
		{"listen: [a]\n", `listen: expected a single value (text or a number), not a list (line 1)`},
		{"loops: 1\nloops: 2\n", `loops: set twice (first on line 1); remove one (line 2)`},
		{"- a\n- b\n", `expected a section of keys (listen, loops, pin_cpus, ...), not a list (line 1)`},
	}
	for _, tt := range tests {
		if got := parseProblems(t, tt.doc); len(got) != 1 || got[0] != tt.want {
			t.Errorf("Parse(%q):\n got %q\nwant %q", tt.doc, got, tt.want)
		}
	}
}

// TestLoadAllProblems: shape problems and refused values come together,
// in file order; a value of the wrong kind keeps its default, so nothing
// that follows from it is reported.
func TestLoadAllProblems(t *testing.T) {
	path := writeFile(t, "all.yaml", `listen: 127.0.0.1:5020
sniff:
  buget: 512
  deadline: 3sec
limits:
  max_input: 1.5
dispatch:
  policy: fastest
loops: 1
loops: 2
`)
	_, err := Load(path)
	if !errors.Is(err, ErrDecode) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load error %v: want both ErrDecode and ErrInvalid", err)
	}
	want := path + `: invalid configuration:
sniff.buget: unknown key; did you mean sniff.budget? (line 3)
sniff.deadline: "3sec" is not a duration (e.g. 500ms, 3s) (line 4)
limits.max_input: 1.5 is not a whole number (line 6)
dispatch.policy: must be one of inline | roundrobin | entropy | leastconns, not "fastest" (line 8)
loops: set twice (first on line 9); remove one (line 10)`
	if err.Error() != want {
		t.Errorf("Load error:\n%s\nwant:\n%s", err, want)
	}
}

// TestSchemaMerges: anchors, aliases and merge keys still load, and a key
// that overrides a merged one is not "set twice".
func TestSchemaMerges(t *testing.T) {
	doc := `pools:
  base: &base {workers: 3, protocols: [modbus]}
  mixed:
    <<: *base
    workers: 4
  copy: *base
routes:
  - match: {proto: modbus}
    action: handle
    pool: mixed
  - match: {proto: "*"}
    action: quarantine
`
	cfg := mustParse(t, doc)
	if cfg.Pools["mixed"].Workers != 4 || cfg.Pools["copy"].Workers != 3 {
		t.Errorf("pools = %+v", cfg.Pools)
	}
	// A merged key is checked where it lands (its line is the anchor's).
	got := parseProblems(t, "pools:\n  b: &b {workers: 1, wrkers: 2, protocols: [http]}\n  p:\n    <<: *b\n")
	want := []string{
		"pools.b.wrkers: unknown key; did you mean pools.b.workers? (line 2)",
		"pools.p.wrkers: unknown key; did you mean pools.p.workers? (line 2)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"tpoic", "topic", 1}, {"buget", "budget", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}} {
		if got := editDistance(tt.a, tt.b); got != tt.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.d)
		}
	}
}
