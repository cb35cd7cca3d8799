package route

import (
	"errors"
	"fmt"
	"strings"
)

// MaxProto bounds protocol numbers: a WorkerSpec.Allowed bit i means
// protocol i, and a traffic class (proto*4 + pattern) must fit a 64-bit
// bitmap, so protocols are 0..MaxProto-1.
const MaxProto = 16

// AllProtocols is the Allowed mask of a worker that takes any protocol.
const AllProtocols uint64 = 1<<MaxProto - 1

// Pattern is a connection's traffic pattern, learned by Profile.
type Pattern uint8

// The traffic patterns. A class is proto*4 + pattern, so there are four.
const (
	PatternUnknown    Pattern = iota // too little seen yet
	PatternBursty                    // many events packed into few ticks
	PatternSteady                    // a regular, moderate rate
	PatternLongPeriod                // an event every LongPeriodMs or rarer
	numPatterns
)

// ErrPattern is returned by ParsePattern for an unknown name.
var ErrPattern = errors.New("route: unknown traffic pattern")

var patternNames = [numPatterns]string{"unknown", "bursty", "steady", "long-period"}

// String returns the name config files use for p.
func (p Pattern) String() string {
	if p < numPatterns {
		return patternNames[p]
	}
	return fmt.Sprintf("Pattern(%d)", uint8(p))
}

// ParsePattern parses a pool's pattern hint: "bursty", "steady",
// "long-period" or "unknown"; "" is PatternUnknown. Case is ignored.
func ParsePattern(s string) (Pattern, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return PatternUnknown, nil
	}
	for i, name := range patternNames {
		if s == name {
			return Pattern(i), nil
		}
	}
	return PatternUnknown, fmt.Errorf("%w: %q", ErrPattern, s)
}

// classBit is the bitmap bit of traffic class proto*4 + pattern. The
// caller has checked proto < MaxProto; an out-of-range pattern counts as
// unknown rather than spilling into the next protocol's classes.
func classBit(proto uint8, pattern Pattern) uint64 {
	return 1 << classIndex(proto, pattern)
}

// classIndex is the number of traffic class proto*4 + pattern, 0..63, on
// the same terms as classBit.
func classIndex(proto uint8, pattern Pattern) uint {
	if pattern >= numPatterns {
		pattern = PatternUnknown
	}
	return uint(proto)*uint(numPatterns) + uint(pattern)
}
