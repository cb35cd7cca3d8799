package cluster

import (
	"errors"
	"strings"
)

// Bus topics become NATS subject tokens and KV key parts: one token per
// topic level, so "plant/line1/temp" is "plant.line1.temp" and a NATS
// client can filter on it with * and > as a bus subscriber would with +
// and #. A subject token and a KV key may carry fewer characters than a
// bus level ('.', '*', '>', spaces and '$' are out, an empty token is
// invalid), so each level is escaped, reversibly:
//
//   - letters, digits and '-' stand for themselves;
//   - every other byte, '_' included, is '_' and two upper-case hex digits
//     ("$SYS" is "_24SYS", "a_b" is "a_5Fb", "é" is "_C3_A9");
//   - an empty level is the token "_" alone, which no escape can produce.
//
// The common topic, made of letters, digits and '-', maps to itself.

// errBadToken is a subject token that escapeLevel cannot have produced.
var errBadToken = errors.New("cluster: not an escaped topic level")

// Tokens returns topic's NATS subject tokens, dot-joined.
func Tokens(topic string) string {
	var b strings.Builder
	b.Grow(len(topic) + 8)
	start := 0
	for i := 0; i <= len(topic); i++ {
		if i < len(topic) && topic[i] != '/' {
			continue
		}
		if start > 0 {
			b.WriteByte('.')
		}
		escapeLevel(&b, topic[start:i])
		start = i + 1
	}
	return b.String()
}

const hexDigits = "0123456789ABCDEF"

func escapeLevel(b *strings.Builder, level string) {
	if level == "" {
		b.WriteByte('_')
		return
	}
	for i := 0; i < len(level); i++ {
		c := level[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// Topic reverses Tokens. It refuses what Tokens cannot produce (a stray
// character, a short or lower-case escape, an escape of a plain byte), so
// every subject has at most one topic.
func Topic(tokens string) (string, error) {
	var b strings.Builder
	b.Grow(len(tokens))
	for i, tok := range strings.Split(tokens, ".") {
		if i > 0 {
			b.WriteByte('/')
		}
		if err := unescapeLevel(&b, tok); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

func unescapeLevel(b *strings.Builder, tok string) error {
	if tok == "_" {
		return nil
	}
	if tok == "" {
		return errBadToken
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		if c != '_' || i+2 >= len(tok) {
			return errBadToken
		}
		hi, lo := strings.IndexByte(hexDigits, tok[i+1]), strings.IndexByte(hexDigits, tok[i+2])
		if hi < 0 || lo < 0 || plainByte(byte(hi<<4|lo)) {
			return errBadToken
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return nil
}
