package cluster

import (
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	for _, c := range []struct{ topic, tokens string }{
		{"plant/line1/temp", "plant.line1.temp"},
		{"$SYS/edgemux/stats", "_24SYS.edgemux.stats"},
		{"a_b/c.d", "a_5Fb.c_2Ed"},
		{"/lead//trail/", "_.lead._.trail._"},
		{"x y/*/>", "x_20y._2A._3E"},
		{"é", "_C3_A9"},
	} {
		if got := Tokens(c.topic); got != c.tokens {
			t.Errorf("Tokens(%q) = %q, want %q", c.topic, got, c.tokens)
		}
		if back, err := Topic(c.tokens); err != nil || back != c.topic {
			t.Errorf("Topic(%q) = %q, %v; want %q", c.tokens, back, err, c.topic)
		}
	}
	for _, bad := range []string{"", "a..b", "_4", "_4g", "_41", "a*", "a.b>", "_2e"} {
		if got, err := Topic(bad); err == nil {
			t.Errorf("Topic(%q) = %q, want an error", bad, got)
		}
	}
}

// validToken is what a NATS subject token and a KV key part may hold.
func validToken(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if !plainByte(tok[i]) && tok[i] != '_' {
			return false
		}
	}
	return true
}

// FuzzTokens: every topic maps to valid tokens and back to itself, and
// every string Topic accepts maps back to the same tokens (one subject,
// one topic).
func FuzzTokens(f *testing.F) {
	for _, s := range []string{"plant/line1/temp", "$SYS/x", "a_b", "", "/", "x//y", "é/ü", "_41", "_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tokens := Tokens(s)
		for _, tok := range strings.Split(tokens, ".") {
			if !validToken(tok) {
				t.Fatalf("Tokens(%q) = %q: token %q is not subject-safe", s, tokens, tok)
			}
		}
		back, err := Topic(tokens)
		if err != nil || back != s {
			t.Fatalf("Topic(Tokens(%q)) = %q, %v", s, back, err)
		}
		if topic, err := Topic(s); err == nil {
			if again := Tokens(topic); again != s {
				t.Fatalf("Tokens(Topic(%q)) = %q", s, again)
			}
		}
	})
}
