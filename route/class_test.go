package route

import (
	"errors"
	"testing"
)

var classifyTests = []struct {
	events, span uint32
	want         Pattern
}{
	{0, 0, PatternUnknown},
	{0, 1000, PatternUnknown},
	{1, 0, PatternUnknown},
	{3, 5, PatternUnknown},
	{1, 29, PatternUnknown},      // span too short to call it long-period
	{1, 30, PatternLongPeriod},   // one event in 30 ticks
	{2, 60, PatternLongPeriod},   // gap exactly 30
	{2, 59, PatternUnknown},      // gap just under 30, too few events for a rate
	{10, 300, PatternLongPeriod}, // a reading every 30 s
	{10, 299, PatternSteady},     // a bit faster: steady
	{4, 10, PatternSteady},       // enough events, moderate rate
	{16, 0, PatternBursty},       // 16 events within one tick
	{15, 0, PatternSteady},       // dense but too few to call a burst
	{33, 1, PatternBursty},       // 33 per tick
	{32, 1, PatternSteady},       // exactly 32 per tick is not over the line
	{3200, 100, PatternSteady},   // 32/tick for 100 ticks
	{3201, 100, PatternBursty},   // just over
	{1 << 31, 1 << 31, PatternSteady},
	{^uint32(0), 0, PatternBursty}, // no overflow at the extremes
	{^uint32(0), ^uint32(0), PatternSteady},
	{1, ^uint32(0), PatternLongPeriod},
}

func TestClassify(t *testing.T) {
	for _, tt := range classifyTests {
		if got := Classify(tt.events, tt.span); got != tt.want {
			t.Errorf("Classify(%d, %d) = %v, want %v", tt.events, tt.span, got, tt.want)
		}
	}
}

// FuzzClassify checks invariants that hold for any input: a valid
// pattern, unknown for no events, and long-period only for sparse spans.
func FuzzClassify(f *testing.F) {
	for _, tt := range classifyTests {
		f.Add(tt.events, tt.span)
	}
	f.Fuzz(func(t *testing.T, events, span uint32) {
		p := Classify(events, span)
		if p >= numPatterns {
			t.Fatalf("Classify(%d, %d) = %d, not a pattern", events, span, p)
		}
		if events == 0 && p != PatternUnknown {
			t.Fatalf("Classify(0, %d) = %v", span, p)
		}
		if p == PatternLongPeriod && uint64(events)*LongPeriodTicks > uint64(span) {
			t.Fatalf("Classify(%d, %d) = long-period with gap under %d", events, span, LongPeriodTicks)
		}
		if p == PatternBursty && uint64(events) <= uint64(span)*BurstEventsPerTick {
			t.Fatalf("Classify(%d, %d) = bursty at no more than %d per tick", events, span, BurstEventsPerTick)
		}
	})
}

var parsePatternTests = []struct {
	in   string
	want Pattern
	err  error
}{
	{"", PatternUnknown, nil},
	{"unknown", PatternUnknown, nil},
	{"bursty", PatternBursty, nil},
	{" Steady ", PatternSteady, nil},
	{"long-period", PatternLongPeriod, nil},
	{"LONG-PERIOD", PatternLongPeriod, nil},
	{"longperiod", PatternUnknown, ErrPattern},
	{"burst", PatternUnknown, ErrPattern},
	{"\x00", PatternUnknown, ErrPattern},
}

func TestParsePattern(t *testing.T) {
	for _, tt := range parsePatternTests {
		got, err := ParsePattern(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("ParsePattern(%q) = %v, %v; want %v, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if s := Pattern(9).String(); s != "Pattern(9)" {
		t.Errorf("Pattern(9).String() = %q", s)
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, tt := range parsePatternTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s)
		if err != nil {
			if !errors.Is(err, ErrPattern) {
				t.Fatalf("ParsePattern(%q) error %v is not ErrPattern", s, err)
			}
			return
		}
		if back, err := ParsePattern(p.String()); err != nil || back != p {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, p, p.String(), back, err)
		}
	})
}

func TestClassBit(t *testing.T) {
	tests := []struct {
		proto   uint8
		pattern Pattern
		bit     uint
	}{
		{0, PatternUnknown, 0},
		{0, PatternLongPeriod, 3},
		{1, PatternBursty, 5},
		{15, PatternLongPeriod, 63},
		{2, Pattern(7), 8}, // out-of-range pattern counts as unknown
	}
	for _, tt := range tests {
		if got := classBit(tt.proto, tt.pattern); got != 1<<tt.bit {
			t.Errorf("classBit(%d, %d) = %#x, want bit %d", tt.proto, tt.pattern, got, tt.bit)
		}
	}
}
