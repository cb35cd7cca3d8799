package north

import (
	"strconv"
	"strings"

	"github.com/edgemux/edgemux/route/bus"
)

// template is a compiled topic template: literal text and placeholders.
type template []part

type part struct {
	lit   string
	field int // 0: lit; -1: {topic}; -2: {gateway}; n > 0: wildcard level n
}

const (
	fieldTopic   = -1
	fieldGateway = -2
)

// compileTemplate reads a template config validated.
func compileTemplate(s string) template {
	var t template
	for s != "" {
		open := strings.IndexByte(s, '{')
		end := strings.IndexByte(s, '}')
		if open < 0 || end < open {
			t = append(t, part{lit: s})
			break
		}
		if open > 0 {
			t = append(t, part{lit: s[:open]})
		}
		switch name := s[open+1 : end]; name {
		case "topic":
			t = append(t, part{field: fieldTopic})
		case "gateway":
			t = append(t, part{field: fieldGateway})
		default:
			n, _ := strconv.Atoi(name)
			t = append(t, part{field: n})
		}
		s = s[end+1:]
	}
	return t
}

// render fills the template in for topic, which filter matched.
func (t template) render(filter, topic, gateway string) string {
	if len(t) == 1 { // "{topic}", the commonest map, and its like: no copy
		switch t[0].field {
		case 0:
			return t[0].lit
		case fieldTopic:
			return topic
		case fieldGateway:
			return gateway
		}
	}
	var wild []string
	var b strings.Builder
	for _, p := range t {
		switch {
		case p.field == 0:
			b.WriteString(p.lit)
		case p.field == fieldTopic:
			b.WriteString(topic)
		case p.field == fieldGateway:
			b.WriteString(gateway)
		default:
			if wild == nil {
				wild = wildLevels(filter, topic)
			}
			if p.field <= len(wild) {
				b.WriteString(wild[p.field-1])
			}
		}
	}
	return b.String()
}

// wildLevels are the parts of topic that filter's wildcards matched, in
// order: a "+" one level, a "#" the rest of the topic.
func wildLevels(filter, topic string) []string {
	var out []string
	fl, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, f := range fl {
		switch {
		case f == "#":
			if i <= len(tl) {
				out = append(out, strings.Join(tl[min(i, len(tl)):], "/"))
			}
			return out
		case f == "+" && i < len(tl):
			out = append(out, tl[i])
		}
	}
	return out
}

// mapping is one compiled map entry of a sink.
type mapping struct {
	from     string
	to       template
	qos      byte
	retain   bool
	onChange bool
}

// command is one compiled commands entry.
type command struct {
	from string
	to   template
}

// busTopic maps a remote topic to its bus topic by the first command
// whose filter matches it; ok is false when none does.
func busTopic(cmds []command, remote, gateway string) (string, bool) {
	for _, c := range cmds {
		if bus.Match(c.from, remote) {
			return c.to.render(c.from, remote, gateway), true
		}
	}
	return "", false
}
