package config

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzParse: no input makes Parse, Validate or LineOf panic, every shape
// problem is one the schema walk words (not yaml.v3's Go type names), and
// what Parse accepts is normalized (Normalize changes nothing more).
func FuzzParse(f *testing.F) {
	// The annotated files go in section by section: whole, they are a few
	// KiB, and the fuzzer spends its time minimizing them instead of
	// mutating (their whole-file parse is covered by the unit tests).
	addSections(f, string(DefaultYAML))
	if example, err := os.ReadFile(examplePath); err == nil {
		addSections(f, exampleLine.ReplaceAllString(string(example), "$1"))
	}
	for _, tt := range validateCases {
		f.Add([]byte(tt.doc))
	}
	f.Add([]byte("pools:\n  a: &p {workers: 1}\n  b: *p\n  <<: {c: {workers: 2}}\n"))
	f.Add([]byte("loops: 1\n---\nloops: 2\n"))
	f.Add([]byte("sniff:\n  buget: 1\n  deadline: 3sec\nroutes: {a: 1}\nloops: 1\nloops: 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			// The schema walk must see whatever the decoder refuses: a
			// message in yaml.v3's words means it missed something.
			if msg := err.Error(); strings.Contains(msg, "cannot unmarshal") || strings.Contains(msg, "not found in type") {
				t.Fatalf("Parse error in the decoder's words: %v", err)
			}
			return
		}
		_ = cfg.Validate()
		for path := range cfg.Lines {
			if cfg.LineOf(path) <= 0 {
				t.Fatalf("LineOf(%q) = %d for an indexed path", path, cfg.LineOf(path))
			}
		}
		routes, pools := slices.Clone(cfg.Routes), maps.Clone(cfg.Pools)
		cfg.Normalize()
		if !reflect.DeepEqual(routes, cfg.Routes) || !reflect.DeepEqual(pools, cfg.Pools) {
			t.Fatal("Parse returned a config that Normalize still changes")
		}
	})
}

// addSections seeds f with each blank-line-separated section of doc.
func addSections(f *testing.F, doc string) {
	for _, section := range strings.Split(doc, "\n\n") {
		f.Add([]byte(section))
	}
}
