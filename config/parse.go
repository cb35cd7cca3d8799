package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Errors Parse and Load return, wrapped with the details.
var (
	// ErrTooLarge: the file or document is over MaxFileSize.
	ErrTooLarge = errors.New("config: file larger than 1 MiB")
	// ErrDecode: the YAML does not parse or does not fit Config (unknown
	// key, wrong type); yaml.v3's message with the line follows.
	ErrDecode = errors.New("config: cannot decode YAML")
	// ErrMultiDoc: the file holds more than one YAML document.
	ErrMultiDoc = errors.New("config: more than one YAML document")
)

// maxLineDepth bounds the recursion that indexes lines: a config is a few
// levels deep, and a hostile document must not blow the stack.
const maxLineDepth = 32

// Load reads the file at path (at most MaxFileSize bytes), parses it and
// validates it. Every error names the file.
func Load(path string) (Config, error) {
	data, err := readCapped(path, MaxFileSize)
	if err != nil {
		return Config{}, err
	}
	cfg, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: invalid configuration:\n%w", path, err)
	}
	return cfg, nil
}

// readCapped reads at most limit bytes of the file and fails when there
// is more, without reading the rest.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	return data, nil
}

// Parse decodes a YAML document over Defaults and normalizes the result;
// it does not validate (Load does). Keys not in Config are errors. Named
// sections merge field by field over the defaults; a pool listed in pools
// starts from the default pool of that name, if any, and `name: ~` removes
// a default pool; a routes list replaces the default routes entirely. An
// empty document gives Defaults. Lines maps each field path found in the
// document to its line.
func Parse(data []byte) (cfg Config, err error) {
	if len(data) > MaxFileSize {
		return Config{}, fmt.Errorf("%w (%d bytes)", ErrTooLarge, len(data))
	}
	defer func() {
		// yaml.v3 has panicked on hostile input before (CVE-2022-28948);
		// a bad file must be an error, never a crash of the gateway.
		if r := recover(); r != nil {
			cfg, err = Config{}, fmt.Errorf("%w: %v", ErrDecode, r)
		}
	}()
	cfg = Defaults()
	if err := decodeStrict(data, &cfg); err != nil {
		return Config{}, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	doc := documentMapping(&root)
	cfg.Lines = make(map[string]int)
	indexLines(doc, "", cfg.Lines, 0)
	if err := mergePools(&cfg, mappingValue(doc, "pools")); err != nil {
		return Config{}, err
	}
	dropOrphanRoutes(&cfg)
	cfg.Normalize()
	return cfg, nil
}

// dropOrphanRoutes removes a default udp.routes entry whose pool the
// document removed (`private: ~` takes the default rudp route with it);
// a route the document sets itself stays, and Validate checks it.
func dropOrphanRoutes(cfg *Config) {
	for class, pool := range Defaults().UDP.Routes {
		_, set := cfg.Lines["udp.routes."+class]
		_, exists := cfg.Pools[pool]
		if !set && !exists && cfg.UDP.Routes[class] == pool {
			delete(cfg.UDP.Routes, class)
		}
	}
}

// decodeStrict decodes the one document in data into cfg, refusing
// unknown keys. An empty input leaves cfg as it is.
func decodeStrict(data []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return fmt.Errorf("%w: %w", ErrDecode, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		// A second document would be silently ignored: say so instead.
		return fmt.Errorf("%w (line %d)", ErrMultiDoc, next.Line)
	}
	return nil
}

// mergePools re-decodes every pool the document lists over the default
// pool of the same name, so a pool's unset fields keep their defaults.
// yaml.v3 makes a fresh value for each map entry, which would lose them.
// decodeStrict has already refused unknown keys, so plain Decode is safe.
func mergePools(cfg *Config, pools *yaml.Node) error {
	if pools == nil || pools.Kind != yaml.MappingNode {
		return nil
	}
	var raw map[string]yaml.Node
	if err := pools.Decode(&raw); err != nil {
		return fmt.Errorf("%w: pools: %w", ErrDecode, err)
	}
	if cfg.Pools == nil {
		cfg.Pools = make(map[string]Pool, len(raw))
	}
	defaults := defaultPools()
	for name, node := range raw {
		if isNull(&node) {
			delete(cfg.Pools, name)
			continue
		}
		pool := defaults[name]
		if err := node.Decode(&pool); err != nil {
			return fmt.Errorf("%w: pools.%s: %w", ErrDecode, name, err)
		}
		cfg.Pools[name] = pool
	}
	return nil
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		return n.Alias
	}
	return n
}

// isNull reports whether n is an explicit null (`~`, `null` or nothing).
func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// documentMapping returns the top-level mapping of a parsed document, or
// nil when the document is empty or not a mapping.
func documentMapping(root *yaml.Node) *yaml.Node {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	if n := resolve(root.Content[0]); n != nil && n.Kind == yaml.MappingNode {
		return n
	}
	return nil
}

// mappingValue returns the value of key in mapping m, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// indexLines records the line of every key and list item under n, by
// field path: "limits.max_conns", "routes[2].backend". Aliases and merge
// keys are not followed: a path points at what the file spells out.
func indexLines(n *yaml.Node, path string, lines map[string]int, depth int) {
	if n == nil || depth > maxLineDepth {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			if key.Kind != yaml.ScalarNode || key.Value == "" || key.ShortTag() == "!!merge" {
				continue // not a field name: nothing to point a path at
			}
			p := joinPath(path, key.Value)
			lines[p] = key.Line
			indexLines(n.Content[i+1], p, lines, depth+1)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			lines[p] = item.Line
			indexLines(item, p, lines, depth+1)
		}
	}
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// parentPath strips the last ".key" or "[i]" from path; "" at the top.
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// LineOf returns the line where path ("limits.max_conns", "routes[2]",
// "pools.private.workers") is set in the parsed file, or else the line of
// its nearest enclosing key that is (so a defaulted field of a listed
// route points at the route); 0 when nothing on the way is in the file.
func (c Config) LineOf(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if line, ok := c.Lines[p]; ok {
			return line
		}
	}
	return 0
}
