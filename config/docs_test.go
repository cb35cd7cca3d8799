package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The repository's root, from this package's directory.
const repoRoot = ".."

// docFiles are the documents whose YAML blocks users copy.
func docFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"README.md", "protocols/*/README.md", "docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	return files
}

// yamlBlock is one ```yaml block of a document.
type yamlBlock struct {
	file string
	line int // of the opening fence
	text string
}

// yamlFence opens a YAML block, at any indentation (blocks inside list
// items are indented); the block ends at a fence with the same indentation.
var yamlFence = regexp.MustCompile("^( *)```ya?ml\\s*$")

func yamlBlocks(t *testing.T, path string) []yamlBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var blocks []yamlBlock
	for i := 0; i < len(lines); i++ {
		m := yamlFence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, start := m[1], i
		var body []string
		for i++; i < len(lines) && strings.TrimRight(lines[i], " ") != indent+"```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: yaml block never closed", path, start+1)
		}
		blocks = append(blocks, yamlBlock{path, start + 1, strings.Join(body, "\n") + "\n"})
	}
	return blocks
}

// loadAsConfig parses text as a whole config file and validates it. A
// token file a block names (/etc/edgemux/operator.token) does not exist
// on the machine running the tests: each is stood in for by a file with a
// valid token, so the rest of the block is checked as written.
func loadAsConfig(t *testing.T, text string) error {
	t.Helper()
	cfg, err := Parse([]byte(text))
	if err != nil {
		return err
	}
	for _, g := range []*AccessGroup{&cfg.Admin.Probe, &cfg.Admin.Scrape, &cfg.Admin.Operator} {
		if g.TokenFile != "" {
			g.TokenFile = filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(g.TokenFile, []byte(strings.Repeat("ab12", 16)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return cfg.Validate()
}

// TestDocYAMLBlocksLoad: every YAML block in the README, the protocol
// READMEs and docs/ is a config that loads: parsed as a whole config file
// (a block may be a fragment: the rest keeps its defaults) and validated.
func TestDocYAMLBlocksLoad(t *testing.T) {
	n := 0
	for _, path := range docFiles(t) {
		for _, b := range yamlBlocks(t, path) {
			n++
			if err := loadAsConfig(t, b.text); err != nil {
				t.Errorf("%s:%d: the yaml block does not load:\n%v\n--- block ---\n%s", b.file, b.line, err, b.text)
			}
		}
	}
	if n < 5 {
		t.Fatalf("found only %d yaml blocks in the docs", n)
	}
}

// TestExampleConfigsLoad: every .yaml file under examples/ loads, token
// files stood in for as in the docs.
func TestExampleConfigsLoad(t *testing.T) {
	n := 0
	err := filepath.WalkDir(filepath.Join(repoRoot, "examples"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		if err := loadAsConfig(t, string(data)); err != nil {
			t.Errorf("%s does not load:\n%v", path, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no yaml file under examples/")
	}
}

// TestDocConfigKeysExist: every dotted config key the docs name in
// backquotes (`limits.memory_limit`, `modbus.upstream`) is a key of the
// config file. The first part must be a top-level key, so that other
// dotted words (`sniff.Detect`, `private.Dial`) are not taken for keys.
func TestDocConfigKeysExist(t *testing.T) {
	root := reflect.TypeFor[Config]()
	top := map[string]bool{}
	for i := range root.NumField() {
		top[yamlName(root.Field(i))] = true
	}
	keyRe := regexp.MustCompile("`([a-z_]+(?:\\.[a-z_]+|\\[\\])+)(?:: [^`]*)?`")
	n := 0
	for _, path := range docFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, sm := range keyRe.FindAllStringSubmatch(string(data), -1) {
			key := sm[1]
			if !top[strings.SplitN(key, ".", 2)[0]] || fileName.MatchString(key) {
				continue
			}
			n++
			if !keyExists(root, strings.Split(strings.ReplaceAll(key, "[]", ""), ".")) {
				t.Errorf("%s: `%s` is not a config key", path, key)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found only %d config keys in the docs", n)
	}
}

// fileName is a dotted word that names a file (modbus.yaml), not a key.
var fileName = regexp.MustCompile(`\.(ya?ml|go|md|sh|png)$`)

// keyExists follows path through the YAML names of t's fields; a map
// takes any name (pools.private), a slice stands for its elements
// (routes.match, modbus.upstream.devices.poll).
func keyExists(t reflect.Type, path []string) bool {
	for len(path) > 0 {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice:
			t = t.Elem()
			continue
		case reflect.Map:
			t, path = t.Elem(), path[1:]
			continue
		case reflect.Struct:
		default:
			return false
		}
		found := false
		for i := range t.NumField() {
			if yamlName(t.Field(i)) == path[0] {
				t, path, found = t.Field(i).Type, path[1:], true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func yamlName(f reflect.StructField) string {
	return strings.SplitN(f.Tag.Get("yaml"), ",", 2)[0]
}
