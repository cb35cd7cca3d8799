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

// Pattern is a connection's traffic pattern, learned by Classify.
type Pattern uint8

// The traffic patterns. A class is proto*4 + pattern, so there are four.
const (
	PatternUnknown    Pattern = iota // too little seen yet
	PatternBursty                    // many events packed into few ticks
	PatternSteady                    // a regular, moderate rate
	PatternLongPeriod                // an event every LongPeriodTicks or rarer
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

// Classify thresholds, in events and in ticks of the caller's coarse
// clock. They are chosen for a tick of about one second, the registry's
// last-active resolution; a caller with another tick should scale spanTicks
// to seconds first.
const (
	// ClassifyMinEvents is how many events a connection needs before any
	// rate means something.
	ClassifyMinEvents = 4
	// LongPeriodTicks: an average gap of this many ticks or more (and a
	// span at least this long) is long-period: a DTU reporting every
	// half-minute or slower, a meter read once a minute.
	LongPeriodTicks = 30
	// BurstMinEvents and BurstEventsPerTick: at least this many events at
	// an average of more than BurstEventsPerTick per tick is bursty.
	BurstMinEvents     = 16
	BurstEventsPerTick = 32
)

// Classify learns a connection's pattern from how many events it produced
// (events) over how many coarse ticks (spanTicks, from its first event to
// its latest, or from accept to now). Integer arithmetic only:
//
//	events == 0                                      -> unknown
//	spanTicks >= LongPeriodTicks
//	    && events*LongPeriodTicks <= spanTicks       -> long-period (gap >= 30 ticks)
//	events < ClassifyMinEvents                       -> unknown
//	events >= BurstMinEvents
//	    && events > spanTicks*BurstEventsPerTick     -> bursty (> 32 events/tick)
//	otherwise                                        -> steady
//
// Long-period is tested first because a rare sender never reaches
// ClassifyMinEvents within a useful time, yet its span already tells us
// what it is. Two numbers summarise the average rate only, not the
// variance of the gaps, so "bursty" here means dense: many events in
// little time, which is what makes two such connections collide on one
// worker. A span of 0 ticks with enough events is the densest case.
func Classify(events, spanTicks uint32) Pattern {
	e, s := uint64(events), uint64(spanTicks)
	switch {
	case e == 0:
		return PatternUnknown
	case s >= LongPeriodTicks && e*LongPeriodTicks <= s:
		return PatternLongPeriod
	case e < ClassifyMinEvents:
		return PatternUnknown
	case e >= BurstMinEvents && e > s*BurstEventsPerTick:
		return PatternBursty
	}
	return PatternSteady
}

// classBit is the bitmap bit of traffic class proto*4 + pattern. The
// caller has checked proto < MaxProto; an out-of-range pattern counts as
// unknown rather than spilling into the next protocol's classes.
func classBit(proto uint8, pattern Pattern) uint64 {
	if pattern >= numPatterns {
		pattern = PatternUnknown
	}
	return 1 << (uint(proto)*uint(numPatterns) + uint(pattern))
}
