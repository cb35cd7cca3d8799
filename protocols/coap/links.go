package coap

import (
	"slices"
	"strconv"
	"strings"

	"github.com/edgemux/edgemux/route/bus"
)

// /.well-known/core (RFC 6690): one link per topic that has a value, in
// topic order so that a block-wise reader sees the same list from block
// to block, and cut at a size limit (the rest is left out, not an error):
//
//	</t/plant/line1/temp>;rt="edgemux.topic";if="core.s";ct=50;obs
//
// A query filters it (RFC 6690 section 4.1): name=value keeps the links
// whose attribute equals value, or starts with it when value ends in "*";
// href matches the link's URI; a name alone (obs) keeps the links that
// have that attribute. Several queries must all hold.

// Link attributes every topic resource has.
const (
	topicRT = "edgemux.topic"
	topicIF = "core.s" // a sensor: its state is read and observed
)

// link is one resource's entry.
type link struct {
	href string
	ct   int
}

// appendLinks renders the links of the bus's topics that pass every
// query, at most limit bytes of them.
func appendLinks(dst []byte, b *bus.Bus, queries []string, limit int) []byte {
	var links []link
	b.Retained("#", func(m bus.Message) bool {
		links = append(links, link{href: topicHref(m.Topic), ct: int(formatOf(m.Payload))})
		return true
	})
	slices.SortFunc(links, func(x, y link) int { return strings.Compare(x.href, y.href) })
	start := len(dst)
	for _, l := range links {
		if !l.matches(queries) {
			continue
		}
		mark := len(dst)
		if mark > start {
			dst = append(dst, ',')
		}
		dst = l.append(dst)
		if len(dst)-start > limit {
			return dst[:mark]
		}
	}
	return dst
}

func (l link) append(dst []byte) []byte {
	dst = append(dst, '<')
	dst = append(dst, l.href...)
	dst = append(dst, `>;rt="`+topicRT+`";if="`+topicIF+`";ct=`...)
	dst = strconv.AppendInt(dst, int64(l.ct), 10)
	return append(dst, ";obs"...)
}

// matches reports whether every query holds for l.
func (l link) matches(queries []string) bool {
	for _, q := range queries {
		name, value, hasValue := strings.Cut(q, "=")
		var attr string
		switch name {
		case "href":
			attr = l.href
		case "rt":
			attr = topicRT
		case "if":
			attr = topicIF
		case "ct":
			attr = strconv.Itoa(l.ct)
		case "obs":
			if hasValue && value != "" {
				return false // obs has no value
			}
			continue
		default:
			return false // an attribute these links do not have
		}
		if !hasValue || !matchValue(attr, value) {
			return false
		}
	}
	return true
}

// matchValue compares an attribute with a query value, a prefix when the
// value ends in "*".
func matchValue(attr, value string) bool {
	if prefix, ok := strings.CutSuffix(value, "*"); ok {
		return strings.HasPrefix(attr, prefix)
	}
	return attr == value
}

// topicHref is the resource path of a topic: /t/ and the topic's levels,
// each percent-encoded where a URI path segment needs it.
func topicHref(topic string) string {
	var sb strings.Builder
	sb.WriteString("/t")
	for _, level := range strings.Split(topic, "/") {
		sb.WriteByte('/')
		for i := 0; i < len(level); i++ {
			c := level[i]
			if pathSafe(c) {
				sb.WriteByte(c)
				continue
			}
			sb.WriteByte('%')
			sb.WriteByte("0123456789ABCDEF"[c>>4])
			sb.WriteByte("0123456789ABCDEF"[c&0xf])
		}
	}
	return sb.String()
}

// pathSafe reports whether c may stand for itself in a URI path segment
// (RFC 3986 pchar: unreserved, sub-delims, ":" and "@"). "," and ";" are
// encoded all the same: they separate links and attributes.
func pathSafe(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+=:@", c) >= 0
}
