package bus

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Topic limits. MaxLevels is fixed; the byte limit is per Bus (Options).
const (
	// MaxLevels is how many "/"-separated levels a topic or filter may have.
	MaxLevels = 32
	// DefaultMaxTopicLen is the byte limit ValidTopic and ValidFilter use
	// and the default of Options.MaxTopicLen.
	DefaultMaxTopicLen = 256
	// maxTopicLenCap is MQTT's own limit; larger options are clamped to it.
	maxTopicLenCap = 65535
)

// ValidTopic reports whether t can be published: 1..DefaultMaxTopicLen
// bytes of UTF-8, at most MaxLevels levels, no wildcards and no NUL. Empty
// levels ("a//b", "/a") are allowed, as in MQTT.
func ValidTopic(t string) error {
	return validTopic(t, DefaultMaxTopicLen, MaxLevels)
}

// ValidFilter reports whether f can be subscribed: like a topic, except
// that a level may be "+" (exactly one level) and the last level may be
// "#" (this level and all below, including none).
func ValidFilter(f string) error {
	return validFilter(f, DefaultMaxTopicLen, MaxLevels)
}

func validTopic(t string, maxLen, maxLevels int) error {
	if err := checkLength(t, maxLen, ErrInvalidTopic); err != nil {
		return err
	}
	levels, ascii := 1, true
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c == '/':
			levels++
		case c == '+' || c == '#':
			return fmt.Errorf("%w: wildcard %q in a topic", ErrInvalidTopic, c)
		case c == 0:
			return fmt.Errorf("%w: NUL character", ErrInvalidTopic)
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return checkShape(t, levels, maxLevels, ascii, ErrInvalidTopic)
}

// validFilter is one pass over f: a wildcard must fill its level, and "#"
// must be the last byte.
func validFilter(f string, maxLen, maxLevels int) error {
	if err := checkLength(f, maxLen, ErrInvalidFilter); err != nil {
		return err
	}
	levels, ascii, levelStart := 1, true, 0
	for i := 0; i < len(f); i++ {
		switch c := f[i]; {
		case c == '/':
			levels++
			levelStart = i + 1
		case c == '+' || c == '#':
			if i != levelStart || (i+1 < len(f) && f[i+1] != '/') {
				return fmt.Errorf("%w: %q must be a whole level", ErrInvalidFilter, c)
			}
			if c == '#' && i+1 != len(f) {
				return fmt.Errorf("%w: \"#\" before the last level", ErrInvalidFilter)
			}
		case c == 0:
			return fmt.Errorf("%w: NUL character", ErrInvalidFilter)
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return checkShape(f, levels, maxLevels, ascii, ErrInvalidFilter)
}

func checkLength(s string, maxLen int, sentinel error) error {
	if s == "" {
		return fmt.Errorf("%w: empty", sentinel)
	}
	if len(s) > maxLen {
		return fmt.Errorf("%w: %d bytes, limit %d", sentinel, len(s), maxLen)
	}
	return nil
}

// checkShape holds the checks left after the byte scan; UTF-8 decoding is
// paid only by non-ASCII names.
func checkShape(s string, levels, maxLevels int, ascii bool, sentinel error) error {
	if levels > maxLevels {
		return fmt.Errorf("%w: %d levels, limit %d", sentinel, levels, maxLevels)
	}
	if !ascii && !utf8.ValidString(s) {
		return fmt.Errorf("%w: not UTF-8", sentinel)
	}
	return nil
}

// Match reports whether filter matches topic under MQTT rules: "+" matches
// one level (an empty one too), "#" the rest including its parent level
// ("sport/#" matches "sport"), and a topic starting with "$" is not matched
// by a filter starting with a wildcard. A malformed filter or topic matches
// nothing; the byte and level limits are not applied here.
func Match(filter, topic string) bool {
	if validFilter(filter, math.MaxInt, math.MaxInt) != nil ||
		validTopic(topic, math.MaxInt, math.MaxInt) != nil {
		return false
	}
	return matchValid(filter, topic)
}

// matchValid is Match for inputs already known to be well formed. It
// walks both strings once, level by level, without allocating.
func matchValid(filter, topic string) bool {
	if topic[0] == '$' && (filter[0] == '+' || filter[0] == '#') {
		return false
	}
	fi, ti := 0, 0
	for {
		// Both indexes are at the start of a level (maybe an empty one).
		switch {
		case fi < len(filter) && filter[fi] == '#':
			return true
		case fi < len(filter) && filter[fi] == '+':
			fi++
			for ti < len(topic) && topic[ti] != '/' {
				ti++
			}
		default:
			for ; fi < len(filter) && filter[fi] != '/'; fi, ti = fi+1, ti+1 {
				if ti >= len(topic) || topic[ti] != filter[fi] {
					return false
				}
			}
			if ti < len(topic) && topic[ti] != '/' {
				return false
			}
		}
		switch {
		case fi == len(filter):
			return ti == len(topic)
		case ti == len(topic):
			return filter[fi+1:] == "#"
		}
		fi, ti = fi+1, ti+1
	}
}

// hasWildcard reports whether a valid filter can match more than one topic.
func hasWildcard(filter string) bool {
	return strings.ContainsAny(filter, "+#")
}

// subscriptions are the filters subscribed, guarded by Bus.trie. A
// filter without wildcards (most are: a device's own topics, an echo's)
// matches one topic, so it is kept by that topic in one map, and only
// filters with wildcards go in the trie: a publish looks its topic up
// once and walks the trie along wildcard branches only, not a map lookup
// per level of its topic (three for "echo/64/0"). Each filter is kept in
// one place, so a subscriber with one filter is still collected at most
// once per publish.
type subscriptions struct {
	exact map[string][]*Subscriber // by filter, which is the topic it matches
	wild  node
}

func (t *subscriptions) empty() bool { return len(t.exact) == 0 && t.wild.empty() }

// insert adds s to a valid filter.
func (t *subscriptions) insert(filter string, s *Subscriber) {
	if hasWildcard(filter) {
		t.wild.insert(filter, s)
		return
	}
	if t.exact == nil {
		t.exact = make(map[string][]*Subscriber)
	}
	t.exact[filter] = append(t.exact[filter], s)
}

// remove takes s off a valid filter.
func (t *subscriptions) remove(filter string, s *Subscriber) {
	if hasWildcard(filter) {
		t.wild.remove(filter, s)
		return
	}
	if subs := removeSub(t.exact[filter], s); len(subs) > 0 {
		t.exact[filter] = subs
	} else {
		delete(t.exact, filter)
	}
}

// collect adds every subscriber whose filter matches a valid topic.
func (t *subscriptions) collect(topic string, c *collector) {
	c.add(t.exact[topic])
	if !t.wild.empty() {
		t.wild.collect(topic, c)
	}
}

// node is one level of the subscription trie. Exact levels hang off
// children; "+" and "#" have their own edges so matching a topic walks at
// most three branches per level.
type node struct {
	children map[string]*node
	plus     *node
	hash     *node
	subs     []*Subscriber // subscribers whose filter ends at this node
}

func (n *node) empty() bool {
	return len(n.children) == 0 && n.plus == nil && n.hash == nil && len(n.subs) == 0
}

// child returns the node for one filter level, creating it when create is
// set.
func (n *node) child(level string, create bool) *node {
	var slot **node
	switch level {
	case "+":
		slot = &n.plus
	case "#":
		slot = &n.hash
	default:
		if c := n.children[level]; c != nil || !create {
			return c
		}
		if n.children == nil {
			n.children = make(map[string]*node)
		}
		c := &node{}
		n.children[level] = c
		return c
	}
	if *slot == nil && create {
		*slot = &node{}
	}
	return *slot
}

// insert adds s at the end of a valid filter.
func (n *node) insert(filter string, s *Subscriber) {
	for rest, more := filter, true; more; {
		var level string
		level, rest, more = strings.Cut(rest, "/")
		n = n.child(level, true)
	}
	n.subs = append(n.subs, s)
}

// remove takes s off a valid filter and prunes nodes left empty. It
// reports whether n itself is empty afterwards.
func (n *node) remove(filter string, s *Subscriber) bool {
	return n.removeLevels(filter, true, s)
}

// removeLevels walks the remaining filter levels; more is false once the
// filter ends at n. Recursion is bounded by the level limit.
func (n *node) removeLevels(filter string, more bool, s *Subscriber) bool {
	if !more {
		n.subs = removeSub(n.subs, s)
		return n.empty()
	}
	level, rest, restMore := strings.Cut(filter, "/")
	c := n.child(level, false)
	if c != nil && c.removeLevels(rest, restMore, s) {
		switch level {
		case "+":
			n.plus = nil
		case "#":
			n.hash = nil
		default:
			delete(n.children, level)
		}
	}
	return n.empty()
}

// removeSub deletes s from subs without keeping order, clearing the freed
// slot so the backing array does not keep s alive.
func removeSub(subs []*Subscriber, s *Subscriber) []*Subscriber {
	for i, x := range subs {
		if x == s {
			last := len(subs) - 1
			subs[i] = subs[last]
			subs[last] = nil
			return subs[:last]
		}
	}
	return subs
}

// collect adds every subscriber whose filter matches a valid topic.
func (n *node) collect(topic string, c *collector) {
	dollar := topic[0] == '$'
	n.matchLevels(topic, dollar, c)
}

// matchLevels matches the remaining topic levels (at least one, maybe
// empty) below n. noWild keeps root wildcards away from "$" topics.
func (n *node) matchLevels(topic string, noWild bool, c *collector) {
	if n.hash != nil && !noWild {
		c.add(n.hash.subs)
	}
	level, rest, more := strings.Cut(topic, "/")
	if exact := n.children[level]; exact != nil {
		exact.afterLevel(rest, more, c)
	}
	if n.plus != nil && !noWild {
		n.plus.afterLevel(rest, more, c)
	}
}

// afterLevel continues below n when more levels remain; otherwise the
// topic ends at n, where filters ending here and "n/#" both match.
func (n *node) afterLevel(rest string, more bool, c *collector) {
	if more {
		n.matchLevels(rest, false, c)
		return
	}
	c.add(n.subs)
	if n.hash != nil {
		c.add(n.hash.subs)
	}
}
