package config

// schema.go checks a parsed YAML document against the shape of Config
// before it is decoded. yaml.v3 alone stops at the first unknown key and
// names Go types ("field buget not found in type config.Sniff"); this
// walk reports every unknown key, every value of the wrong kind and every
// key set twice, each with its field path, its line and what is expected,
// in the words of the file: the yaml tags, never a Go type name.

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// maxSchemaVisits bounds the nodes one walk visits: aliases can make a
// small file a huge tree (a "billion laughs" document), and the walk
// follows them as the decoder does.
const maxSchemaVisits = 1 << 16

// maxShownValue is how much of a bad value a message quotes.
const maxShownValue = 40

var durationType = reflect.TypeOf(time.Duration(0))

// schemaWalk collects the problems of one document.
type schemaWalk struct {
	problems []*FieldError
	bad      []*yaml.Node // values of the wrong kind
	visits   int
}

// checkSchema walks the document root against Config and returns its
// problems in the order found. An empty document has none. Every value
// of the wrong kind is made a null in the tree, so that decoding keeps
// the default there instead of a half-read value (yaml.v3 reads 1.5 as 1)
// and validating the rest does not report what follows from it.
func checkSchema(root *yaml.Node) []*FieldError {
	w := &schemaWalk{}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	w.walk(root.Content[0], reflect.TypeOf(Config{}), "", 0)
	for _, n := range w.bad {
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "~", Line: n.Line, Column: n.Column}
	}
	return w.problems
}

func (w *schemaWalk) fail(path string, line int, format string, args ...any) {
	w.problems = append(w.problems, &FieldError{
		Path: path, Line: line, Problem: fmt.Sprintf(format, args...), kind: ErrDecode,
	})
}

// refuse reports value n, of the wrong kind, and marks it to be nulled.
func (w *schemaWalk) refuse(n *yaml.Node, path, format string, args ...any) {
	w.fail(path, n.Line, format, args...)
	w.bad = append(w.bad, n)
}

// walk checks node n where a value of type t goes, at path.
func (w *schemaWalk) walk(n *yaml.Node, t reflect.Type, path string, depth int) {
	n = resolve(n)
	w.visits++
	if n == nil || depth > maxLineDepth || w.visits > maxSchemaVisits || isNull(n) {
		return // null keeps the default, as the decoder does
	}
	switch {
	case t == durationType:
		w.scalar(n, t, path, "a duration (e.g. 500ms, 3s)")
	case t.Kind() == reflect.Struct:
		if w.expect(n, yaml.MappingNode, path, sectionWords(t)) {
			w.structKeys(n, t, path, depth)
		}
	case t.Kind() == reflect.Map:
		if w.expect(n, yaml.MappingNode, path, "a mapping of name: value") {
			w.mapEntries(n, t, path, depth)
		}
	case t.Kind() == reflect.Slice:
		if w.expect(n, yaml.SequenceNode, path, "a list (lines starting with -, or [a, b])") {
			for i, item := range n.Content {
				w.walk(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", depth+1)
			}
		}
	default:
		w.scalar(n, t, path, scalarWords(t))
	}
}

// expect reports n when it is not of kind want; want says what was
// expected.
func (w *schemaWalk) expect(n *yaml.Node, kind yaml.Kind, path, want string) bool {
	if n.Kind == kind {
		return true
	}
	w.refuse(n, path, "expected %s, not %s", want, describe(n))
	return false
}

// structKeys checks the keys of mapping n against the fields of struct
// t. A key set twice is an error, unless one of the two came in by a
// `<<:` merge: the explicit key overrides it.
func (w *schemaWalk) structKeys(n *yaml.Node, t reflect.Type, path string, depth int) {
	fields := fieldTypes(t)
	seen := map[string]int{}
	for _, pair := range mappingPairs(n, 0) {
		key, value := pair[0], pair[1]
		if key.Kind != yaml.ScalarNode {
			w.fail(path, key.Line, "a key must be a plain word, not %s", describe(key))
			continue
		}
		at := joinPath(path, key.Value)
		ft, ok := fields[key.Value]
		if !ok {
			w.fail(at, key.Line, "unknown key%s", suggestion(key.Value, path, t))
			continue
		}
		if w.setTwice(seen, pair, at) {
			continue
		}
		w.walk(value, ft, at, depth+1)
	}
}

// setTwice reports (and records) a key the mapping spells out twice.
func (w *schemaWalk) setTwice(seen map[string]int, pair keyValue, at string) bool {
	if pair.merged() {
		return false
	}
	key := pair[0]
	if first, dup := seen[key.Value]; dup {
		w.fail(at, key.Line, "set twice (first on line %d); remove one", first)
		return true
	}
	seen[key.Value] = key.Line
	return false
}

// mapEntries checks a mapping whose keys are names (pools, udp.routes).
func (w *schemaWalk) mapEntries(n *yaml.Node, t reflect.Type, path string, depth int) {
	seen := map[string]int{}
	for _, pair := range mappingPairs(n, 0) {
		key, value := pair[0], pair[1]
		if key.Kind != yaml.ScalarNode {
			w.fail(path, key.Line, "a name must be a plain word, not %s", describe(key))
			continue
		}
		at := joinPath(path, key.Value)
		if w.setTwice(seen, pair, at) {
			continue
		}
		w.walk(value, t.Elem(), at, depth+1)
	}
}

// keyValue is one key and its value in a mapping; merged says the key
// came in by a `<<:` merge, where an explicit key may override it.
type keyValue [3]*yaml.Node

func (kv keyValue) merged() bool { return kv[2] != nil }

// mappingPairs lists the key-value pairs of mapping n, those merged in
// by `<<:` (a mapping, or a list of them) first, as yaml.v3 applies them.
func mappingPairs(n *yaml.Node, depth int) []keyValue {
	n = resolve(n)
	if n == nil || depth > maxLineDepth {
		return nil
	}
	var merged, own []keyValue
	switch n.Kind {
	case yaml.SequenceNode:
		for _, item := range n.Content {
			merged = append(merged, mappingPairs(item, depth+1)...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if key.ShortTag() == "!!merge" {
				merged = append(merged, mappingPairs(value, depth+1)...)
				continue
			}
			own = append(own, keyValue{key, value})
		}
	}
	for i := range merged {
		merged[i][2] = merged[i][0]
	}
	return append(merged, own...)
}

// scalar checks that n is a scalar the decoder turns into a t, and that a
// number meant to be whole is.
func (w *schemaWalk) scalar(n *yaml.Node, t reflect.Type, path, want string) {
	if n.Kind != yaml.ScalarNode {
		w.refuse(n, path, "expected %s, not %s", want, describe(n))
		return
	}
	err := n.Decode(reflect.New(t).Interface())
	if err == nil && isInt(t) && n.ShortTag() == "!!float" {
		// yaml.v3 would quietly drop the fraction: 1.5 becomes 1.
		if f, ferr := strconv.ParseFloat(n.Value, 64); ferr != nil || f != math.Trunc(f) {
			err = fmt.Errorf("not whole")
		}
	}
	if err == nil {
		return
	}
	hint := ""
	switch {
	case t == durationType && n.ShortTag() == "!!int":
		hint = ": a number needs a unit (ms, s, m, h)"
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 && fitsUnquoted(n, t):
		hint = ": write it without quotes"
	}
	w.refuse(n, path, "%s is not %s%s", describe(n), want, hint)
}

// fitsUnquoted reports whether the quoted scalar n would decode into a t
// written without its quotes ("100" for a number).
func fitsUnquoted(n *yaml.Node, t reflect.Type) bool {
	plain := yaml.Node{Kind: yaml.ScalarNode, Value: n.Value}
	return plain.Decode(reflect.New(t).Interface()) == nil
}

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// scalarWords says what a scalar of type t is, in a user's words.
func scalarWords(t reflect.Type) string {
	switch {
	case isInt(t):
		return "a whole number"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	}
	return "a single value (text or a number)"
}

// describe names what a node holds: a quoted value, a list, a mapping.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping (key: value)"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > maxShownValue {
			v = v[:maxShownValue] + "..."
		}
		if n.ShortTag() == "!!str" {
			return strconv.Quote(v)
		}
		return v
	}
	return "this"
}

// suggestion is the "did you mean" for an unknown key: the field of t
// nearest to key by edit distance, when near enough to be a typo, or
// else the keys t takes.
func suggestion(key, path string, t reflect.Type) string {
	names := fieldNames(t)
	best, bestDist := "", math.MaxInt
	folded := strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	for _, name := range names {
		if d := editDistance(folded, name); d < bestDist {
			best, bestDist = name, d
		}
	}
	if best != "" && bestDist <= max(1, min(3, len(key)/3)) {
		return fmt.Sprintf("; did you mean %s?", joinPath(path, best))
	}
	where := path
	if where == "" {
		where = "the top level"
	}
	return fmt.Sprintf("; %s takes %s", where, strings.Join(names, ", "))
}

// editDistance is the optimal string alignment distance of a and b: the
// insertions, deletions, substitutions and swaps of neighbours that turn
// one into the other (tpoic -> topic is one swap).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// structFields caches, per struct type, its yaml keys and their types.
var structFields sync.Map // reflect.Type -> map[string]reflect.Type

// fieldTypes returns the yaml keys of struct t and the type behind each.
func fieldTypes(t reflect.Type) map[string]reflect.Type {
	if m, ok := structFields.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name) // yaml.v3's default key
		}
		m[name] = f.Type
	}
	structFields.Store(t, m)
	return m
}

// fieldNames returns the yaml keys of struct t in declaration order.
func fieldNames(t reflect.Type) []string {
	fields := fieldTypes(t)
	names := make([]string, 0, len(fields))
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" {
			name = strings.ToLower(t.Field(i).Name)
		}
		if _, ok := fields[name]; ok {
			names = append(names, name)
		}
	}
	return names
}

// sectionWords says what a section of struct type t looks like.
func sectionWords(t reflect.Type) string {
	names := fieldNames(t)
	if len(names) > 3 {
		names = append(names[:3:3], "...")
	}
	return "a section of keys (" + strings.Join(names, ", ") + ")"
}
