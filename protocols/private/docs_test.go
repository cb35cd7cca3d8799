package private

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// errorCodes reads code.go's Code constants as SPEC.md names them
// (CodeGoingAway -> GOING_AWAY, CodeBadCRC -> BAD_CRC).
func errorCodes(t *testing.T) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "code.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	wordStart := regexp.MustCompile(`([a-z])([A-Z])`)
	codes := map[string]int{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i >= len(vs.Values) {
				break
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || !strings.HasPrefix(name.Name, "Code") || name.Name == "CodeOK" {
				continue
			}
			v, err := strconv.Atoi(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			codes[strings.ToUpper(wordStart.ReplaceAllString(strings.TrimPrefix(name.Name, "Code"), "${1}_${2}"))] = v
		}
		return true
	})
	if len(codes) < 15 {
		t.Fatalf("found only %v in code.go", codes)
	}
	return codes
}

// TestSpecErrorCodesAreTheCode: SPEC.md's table of ERROR codes is
// code.go's, name for name and number for number, and wherever a document
// users read gives a code's number (`CACHE_FULL` (23), GOING_AWAY, code
// 33) it is the right one.
func TestSpecErrorCodesAreTheCode(t *testing.T) {
	codes := errorCodes(t)
	spec, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+) +\| ([A-Z_]+) +\| (yes|no) +\|`)
	inSpec := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(spec), -1) {
		n, _ := strconv.Atoi(m[1])
		inSpec[m[2]] = true
		if want, ok := codes[m[2]]; !ok {
			t.Errorf("SPEC.md lists %s (%d), which code.go does not have", m[2], n)
		} else if want != n {
			t.Errorf("SPEC.md gives %s as %d, code.go as %d", m[2], n, want)
		}
	}
	for name, n := range codes {
		if !inSpec[name] {
			t.Errorf("code.go has %s (%d), which SPEC.md's table lacks", name, n)
		}
	}
	docs := []string{"SPEC.md", "README.md", "../../README.md"}
	more, _ := filepath.Glob("../../docs/*.md")
	mention := regexp.MustCompile("`?([A-Z][A-Z_]+[A-Z])`?(?: \\(|, code )(\\d+)\\)?")
	seen := 0
	for _, path := range append(docs, more...) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mention.FindAllStringSubmatch(string(data), -1) {
			want, ok := codes[m[1]]
			if !ok {
				continue // another protocol's name
			}
			seen++
			if n, _ := strconv.Atoi(m[2]); n != want {
				t.Errorf("%s: %s is %d, not %d", path, m[0], want, n)
			}
		}
	}
	if seen < 3 {
		t.Fatalf("found only %d code numbers in the docs", seen)
	}
}
