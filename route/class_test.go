package route

import (
	"errors"
	"testing"
)

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
