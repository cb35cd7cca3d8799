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
	// ErrDecode: the YAML does not parse (yaml.v3's message with the line
	// follows) or does not fit Config: an unknown key, a value of the
	// wrong kind, a key set twice (a *FieldError each).
	ErrDecode = errors.New("config: cannot decode YAML")
	// ErrMultiDoc: the file holds more than one YAML document.
	ErrMultiDoc = errors.New("config: more than one YAML document")
)

// maxLineDepth bounds the recursion that indexes lines: a config is a few
// levels deep, and a hostile document must not blow the stack.
const maxLineDepth = 32

// Load reads the file at path (at most MaxFileSize bytes), parses it and
// validates it. Every error names the file. Keys and values that do not
// fit the file's shape and values Validate refuses are reported together,
// in file order: one run of `edgemux check` shows every problem.
func Load(path string) (Config, error) {
	data, err := readCapped(path, MaxFileSize)
	if err != nil {
		return Config{}, err
	}
	cfg, problems, err := parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	problems = append(problems, validationProblems(cfg, problems)...)
	if len(problems) > 0 {
		sortByLine(problems)
		return Config{}, fmt.Errorf("%s: invalid configuration:\n%w", path, errors.Join(problems...))
	}
	return cfg, nil
}

// validationProblems validates cfg, a config parse decoded as far as it
// could, leaving out what concerns a path that already has a shape
// problem: a value that did not decode kept its default, and is not what
// the file says.
func validationProblems(cfg Config, shape []error) []error {
	err := cfg.Validate()
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if errors.As(e, &fe) && coveredBy(fe.Path, shape) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// coveredBy reports whether path is, or is inside, the path of one of
// the shape problems.
func coveredBy(path string, shape []error) bool {
	for _, e := range shape {
		var fe *FieldError
		if !errors.As(e, &fe) || fe.Path == "" {
			continue
		}
		if path == fe.Path || strings.HasPrefix(path, fe.Path+".") || strings.HasPrefix(path, fe.Path+"[") {
			return true
		}
	}
	return false
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
// it does not validate (Load does). Keys not in Config, values of the
// wrong kind and keys set twice are errors, all of them reported at once
// (errors.Join of *FieldError wrapping ErrDecode). Named sections merge
// field by field over the defaults; a pool listed in pools starts from
// the default pool of that name, if any, and `name: ~` removes a default
// pool; a routes list replaces the default routes entirely. An empty
// document gives Defaults. Lines maps each field path found in the
// document to its line.
func Parse(data []byte) (Config, error) {
	cfg, problems, err := parse(data)
	if err != nil {
		return Config{}, err
	}
	if len(problems) > 0 {
		return Config{}, errors.Join(problems...)
	}
	return cfg, nil
}

// parse is Parse that also returns the config as far as it decoded when
// the document has shape problems, so Load can validate the rest. err is
// for what leaves nothing to decode: a syntax error, a second document,
// a file too large.
func parse(data []byte) (cfg Config, problems []error, err error) {
	if len(data) > MaxFileSize {
		return Config{}, nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, len(data))
	}
	defer func() {
		// yaml.v3 has panicked on hostile input before (CVE-2022-28948);
		// a bad file must be an error, never a crash of the gateway.
		if r := recover(); r != nil {
			cfg, problems, err = Config{}, nil, fmt.Errorf("%w: %v", ErrDecode, r)
		}
	}()
	root, err := decodeOne(data)
	if err != nil {
		return Config{}, nil, err
	}
	problems = shapeProblems(root)
	if len(problems) > 0 {
		// yaml.v3 stops decoding a mapping at a key set twice; without
		// the first of the two the rest still decodes and validates.
		dropDuplicateKeys(root, 0)
	}
	cfg = Defaults()
	if err := root.Decode(&cfg); err != nil && !isTypeError(err) {
		return Config{}, nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	if len(problems) == 0 {
		problems = strictProblems(data)
	}
	doc := documentMapping(root)
	cfg.Lines = make(map[string]int)
	indexLines(doc, "", cfg.Lines, 0)
	if err := mergePools(&cfg, mappingValue(doc, "pools")); err != nil {
		return Config{}, nil, err
	}
	dropOrphanRoutes(&cfg)
	cfg.Normalize()
	return cfg, problems, nil
}

// shapeProblems walks the document against Config (schema.go), the first
// maxProblems of them and a count of the rest.
func shapeProblems(root *yaml.Node) []error {
	found := checkSchema(root)
	problems := make([]error, 0, min(len(found), maxProblems)+1)
	for _, p := range found[:min(len(found), maxProblems)] {
		problems = append(problems, p)
	}
	if n := len(found) - maxProblems; n > 0 {
		problems = append(problems, fmt.Errorf("%w: %d more problems not shown", ErrDecode, n))
	}
	return problems
}

// strictProblems decodes data once more as yaml.v3 strictly would: a
// safety net under the schema walk. Should the walk ever miss what the
// decoder refuses, the decoder's own words are better than silence.
func strictProblems(data []byte) []error {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return []error{fmt.Errorf("%w: %w", ErrDecode, err)}
	}
	return nil
}

func isTypeError(err error) bool {
	var te *yaml.TypeError
	return errors.As(err, &te)
}

// dropDuplicateKeys removes, in every mapping under n, each key that the
// same mapping sets again later, so the last one is what decodes.
// Aliases are not followed: what they point at is visited where it is
// written.
func dropDuplicateKeys(n *yaml.Node, depth int) {
	if n == nil || depth > maxLineDepth {
		return
	}
	if n.Kind == yaml.MappingNode {
		last := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.ShortTag() != "!!merge" {
				last[k.Value] = i
			}
		}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if j, ok := last[k.Value]; ok && j != i && k.Kind == yaml.ScalarNode && k.ShortTag() != "!!merge" {
				continue
			}
			kept = append(kept, n.Content[i], n.Content[i+1])
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		dropDuplicateKeys(c, depth+1)
	}
}

// decodeOne parses the one document in data into a node tree; an empty
// input gives an empty document.
func decodeOne(data []byte) (*yaml.Node, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return &yaml.Node{Kind: yaml.DocumentNode}, nil
		}
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		// A second document would be silently ignored: say so instead.
		return nil, fmt.Errorf("%w (line %d)", ErrMultiDoc, next.Line)
	}
	return &root, nil
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

// mergePools re-decodes every pool the document lists over the default
// pool of the same name, so a pool's unset fields keep their defaults.
// yaml.v3 makes a fresh value for each map entry, which would lose them.
// A value of the wrong kind is left as decoded: the schema walk has
// reported it.
func mergePools(cfg *Config, pools *yaml.Node) error {
	if pools == nil || pools.Kind != yaml.MappingNode {
		return nil
	}
	if cfg.Pools == nil {
		cfg.Pools = make(map[string]Pool, len(pools.Content)/2)
	}
	defaults := defaultPools()
	for _, pair := range mappingPairs(pools, 0) {
		key, node := pair[0], pair[1]
		if key.Kind != yaml.ScalarNode {
			continue // reported by the schema walk
		}
		name := key.Value
		if isNull(node) {
			delete(cfg.Pools, name)
			continue
		}
		pool := defaults[name]
		if err := node.Decode(&pool); err != nil && !isTypeError(err) {
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
