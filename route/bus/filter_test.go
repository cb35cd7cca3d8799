package bus

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

var matchTests = []struct {
	filter, topic string
	want          bool
}{
	// MQTT 3.1.1 section 4.7 examples.
	{"sport/tennis/player1/#", "sport/tennis/player1", true},
	{"sport/tennis/player1/#", "sport/tennis/player1/ranking", true},
	{"sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true},
	{"sport/#", "sport", true},
	{"sport/#", "sports", false},
	{"#", "sport/tennis", true},
	{"#", "/", true},
	{"sport/tennis/+", "sport/tennis/player1", true},
	{"sport/tennis/+", "sport/tennis/player2", true},
	{"sport/tennis/+", "sport/tennis/player1/ranking", false},
	{"sport/+", "sport", false},
	{"sport/+", "sport/", true},
	{"+", "sport", true},
	{"+/tennis/#", "sport/tennis/player1/ranking", true},
	{"+/+", "/finance", true},
	{"/+", "/finance", true},
	{"+", "/finance", false},
	{"+/+", "/", true},
	{"+", "/", false},
	{"/#", "/finance", true},
	{"/#", "finance", false},
	// "$" topics escape top-level wildcards only.
	{"#", "$SYS/monitor/Clients", false},
	{"+/monitor/Clients", "$SYS/monitor/Clients", false},
	{"$SYS/#", "$SYS/monitor/Clients", true},
	{"$SYS/monitor/+", "$SYS/monitor/Clients", true},
	{"$SYS", "$SYS", true},
	{"a/#", "a/$b", true},
	// Exact levels, empty levels, case.
	{"a/b", "a/b", true},
	{"a/b", "a/b/c", false},
	{"a/b", "a", false},
	{"a/b/#", "a", false},
	{"a/+/b", "a//b", true},
	{"a//b", "a//b", true},
	{"a//b", "a/b", false},
	{"a/", "a/", true},
	{"a/", "a", false},
	{"a/+", "a", false},
	{"ACCOUNTS", "Accounts", false},
	{"ünï/+", "ünï/cødé", true},
	// Malformed on either side matches nothing.
	{"sport+", "sport+", false},
	{"sport/tennis#", "sport/tennis#", false},
	{"sport/#/ranking", "sport/x/ranking", false},
	{"#", "", false},
	{"", "a", false},
	{"#", "a/+", false},
	{"#", "a\x00", false},
	{"#", "\xff", false},
}

func TestMatch(t *testing.T) {
	for _, tt := range matchTests {
		if got := Match(tt.filter, tt.topic); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.filter, tt.topic, got, tt.want)
		}
		if got := refMatch(tt.filter, tt.topic); got != tt.want {
			t.Errorf("refMatch(%q, %q) = %v, want %v", tt.filter, tt.topic, got, tt.want)
		}
		if ValidFilter(tt.filter) == nil && ValidTopic(tt.topic) == nil {
			if got := trieMatch(tt.filter, tt.topic); got != tt.want {
				t.Errorf("trie: %q on %q = %v, want %v", tt.filter, tt.topic, got, tt.want)
			}
		}
	}
}

func TestValidTopic(t *testing.T) {
	tests := []struct {
		topic string
		ok    bool
	}{
		{"a", true},
		{"a/b/c", true},
		{"/", true},
		{"//", true},
		{"$SYS/x", true},
		{"ünï/cødé", true},
		{" ", true},
		{strings.Repeat("x", DefaultMaxTopicLen), true},
		{strings.Repeat("a/", MaxLevels-1) + "a", true},
		{"", false},
		{"a/+", false},
		{"#", false},
		{"a+b", false},
		{"a\x00b", false},
		{"\xff", false},
		{strings.Repeat("x", DefaultMaxTopicLen+1), false},
		{strings.Repeat("a/", MaxLevels) + "a", false},
	}
	for _, tt := range tests {
		err := ValidTopic(tt.topic)
		if (err == nil) != tt.ok {
			t.Errorf("ValidTopic(%q) = %v, want ok=%v", tt.topic, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("ValidTopic(%q) = %v, not ErrInvalidTopic", tt.topic, err)
		}
	}
}

func TestValidFilter(t *testing.T) {
	tests := []struct {
		filter string
		ok     bool
	}{
		{"#", true},
		{"+", true},
		{"+/+", true},
		{"a/#", true},
		{"/#", true},
		{"$SYS/#", true},
		{"a/+/b", true},
		{"a//b", true},
		{strings.Repeat("+/", MaxLevels-1) + "#", true},
		{"", false},
		{"a#", false},
		{"a/#/b", false},
		{"#/", false},
		{"a+/b", false},
		{"+a", false},
		{"##", false},
		{"++", false},
		{"\xff", false},
		{"a\x00", false},
		{strings.Repeat("+/", MaxLevels) + "#", false},
		{strings.Repeat("x", DefaultMaxTopicLen+1), false},
	}
	for _, tt := range tests {
		err := ValidFilter(tt.filter)
		if (err == nil) != tt.ok {
			t.Errorf("ValidFilter(%q) = %v, want ok=%v", tt.filter, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidFilter) {
			t.Errorf("ValidFilter(%q) = %v, not ErrInvalidFilter", tt.filter, err)
		}
	}
}

// refMatch is a plain split-based reading of the MQTT rules, to check the
// allocation-free Match and the trie against.
func refMatch(filter, topic string) bool {
	if validFilter(filter, 1<<30, 1<<30) != nil || validTopic(topic, 1<<30, 1<<30) != nil {
		return false
	}
	fl, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	if topic[0] == '$' && (fl[0] == "+" || fl[0] == "#") {
		return false
	}
	for i, l := range fl {
		if l == "#" {
			return true
		}
		if i >= len(tl) || (l != "+" && l != tl[i]) {
			return false
		}
	}
	return len(fl) == len(tl)
}

// trieMatch reports whether subscriptions holding only filter match
// topic, and checks that removing the filter leaves them empty.
func trieMatch(filter, topic string) bool {
	var root subscriptions
	s := &Subscriber{id: 1, filters: []string{filter}}
	root.insert(filter, s)
	var c collector
	root.collect(topic, &c)
	root.remove(filter, s)
	if !root.empty() {
		panic("trie not empty after remove of " + filter)
	}
	return len(c.single)+len(c.multi) == 1
}

func FuzzMatch(f *testing.F) {
	for _, tt := range matchTests {
		f.Add(tt.filter, tt.topic)
	}
	f.Fuzz(func(t *testing.T, filter, topic string) {
		got := Match(filter, topic)
		if want := refMatch(filter, topic); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", filter, topic, got, want)
		}
		filterOK, topicOK := ValidFilter(filter) == nil, ValidTopic(topic) == nil
		if filterOK && topicOK && trieMatch(filter, topic) != got {
			t.Fatalf("trie disagrees with Match(%q, %q) = %v", filter, topic, got)
		}
		if got && (validFilter(filter, 1<<30, 1<<30) != nil || validTopic(topic, 1<<30, 1<<30) != nil) {
			t.Fatalf("Match(%q, %q) is true for malformed input", filter, topic)
		}
		if topicOK {
			if ValidFilter(topic) != nil || !Match(topic, topic) {
				t.Fatalf("valid topic %q is not a filter matching itself", topic)
			}
		}
		if filterOK && !hasWildcard(filter) && ValidTopic(filter) != nil {
			t.Fatalf("wildcard-free filter %q is not a valid topic", filter)
		}
	})
}

func TestMatchAllocs(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		Match("sport/+/player1/#", "sport/tennis/player1/score/wimbledon")
	})
	if allocs != 0 {
		t.Fatalf("Match allocates %v times, want 0", allocs)
	}
}

func BenchmarkMatch(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Match("sport/+/player1/#", "sport/tennis/player1/score/wimbledon")
	}
}

// TestExactSubscribersInAnyOrder adds three subscribers to one filter
// without wildcards and takes them off in every order: each publish must
// collect exactly those left, and the last one gone must leave nothing
// behind.
func TestExactSubscribersInAnyOrder(t *testing.T) {
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, order := range orders {
		var subs subscriptions
		all := []*Subscriber{{id: 1}, {id: 2}, {id: 3}}
		for _, s := range all {
			subs.insert("plant/line1/temp", s)
		}
		left := map[*Subscriber]bool{all[0]: true, all[1]: true, all[2]: true}
		check := func() {
			t.Helper()
			var c collector
			subs.collect("plant/line1/temp", &c)
			got := map[*Subscriber]bool{}
			for _, s := range append(c.single, c.multi...) {
				if got[s] {
					t.Fatalf("order %v: subscriber %d collected twice", order, s.id)
				}
				got[s] = true
			}
			if !maps.Equal(got, left) {
				t.Fatalf("order %v: collected %d subscribers, want %d", order, len(got), len(left))
			}
		}
		check()
		for _, i := range order {
			subs.remove("plant/line1/temp", all[i])
			subs.remove("plant/line1/temp", all[i]) // twice: a no-op
			delete(left, all[i])
			check()
		}
		if !subs.empty() {
			t.Fatalf("order %v: subscriptions not empty after every subscriber left: %+v", order, subs.exact)
		}
	}
}
