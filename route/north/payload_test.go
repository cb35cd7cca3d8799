package north

import (
	"testing"
)

// TestChangeTableBound: the on: change table never holds more than its
// limit; a topic pushed out is counted and sent again on its next
// message, unchanged or not.
func TestChangeTableBound(t *testing.T) {
	c := newChangeTable(2)
	for _, topic := range []string{"a", "b", "c"} {
		if !c.changed(topic, []byte("1")) {
			t.Fatalf("first payload of %s not sent", topic)
		}
	}
	if len(c.last) != 2 || c.evicted.Load() != 1 {
		t.Fatalf("table holds %d, evicted %d; want 2 and 1", len(c.last), c.evicted.Load())
	}
	var gone string
	for _, topic := range []string{"a", "b", "c"} {
		if _, ok := c.last[topic]; !ok {
			gone = topic
		}
	}
	for topic := range c.last {
		if c.changed(topic, []byte("1")) {
			t.Errorf("unchanged %s sent again", topic)
		}
	}
	if !c.changed(gone, []byte("1")) {
		t.Errorf("evicted %s not sent again", gone)
	}
}

// TestTemplates: placeholders fill in as the README says.
func TestTemplates(t *testing.T) {
	for _, tt := range []struct{ filter, tmpl, topic, want string }{
		{"plant/+/temp", "site/{gateway}/{1}/t", "plant/a/temp", "site/gw/a/t"},
		{"plant/#", "x/{1}", "plant/a/b/c", "x/a/b/c"},
		{"plant/#", "x/{topic}", "plant", "x/plant"},
		{"+/+/#", "{2}.{1}/{3}", "a/b/c/d", "b.a/c/d"},
		{"cmd/#", "{1}", "cmd/ctl/lamp", "ctl/lamp"},
		{"plant/#", "{topic}", "plant/a", "plant/a"},
		{"plant/#", "{gateway}", "plant/a", "gw"},
		{"plant/#", "fixed/topic", "plant/a", "fixed/topic"},
		{"plant/+", "{1}", "plant/a", "a"},
	} {
		if got := compileTemplate(tt.tmpl).render(tt.filter, tt.topic, "gw"); got != tt.want {
			t.Errorf("%s with %s on %s = %q, want %q", tt.tmpl, tt.filter, tt.topic, got, tt.want)
		}
	}
	for _, tt := range []struct{ topic, subject string }{{"a/b", "a.b"}, {"a", "a"}, {"a.b/c", ""}, {"a//b", ""}, {"a/b c", ""}, {"", ""}, {"/a", ""}, {"a/", ""}, {"a/*", ""}, {"a/>", ""}, {"a/b\tc", ""}} {
		got, ok := subjectOf(tt.topic)
		if ok != (tt.subject != "") || got != tt.subject {
			t.Errorf("subjectOf(%q) = %q, %v", tt.topic, got, ok)
		}
	}
}
