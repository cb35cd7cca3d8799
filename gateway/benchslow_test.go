//go:build benchslow

package gateway

import (
	"net/netip"
	"testing"
	"time"

	"github.com/edgemux/edgemux/sniff"
)

// TestBenchSlowKnob: the benchmark build reads EDGEMUX_BENCH_SLOW, and
// refuses what it cannot mean rather than run a benchmark without it.
func TestBenchSlowKnob(t *testing.T) {
	t.Setenv("EDGEMUX_BENCH_SLOW", "modbus:5ms")
	if s := loadBenchSlow(); s.proto != sniff.Modbus || s.delay != 5*time.Millisecond {
		t.Errorf("modbus:5ms read as %v %v", s.proto, s.delay)
	}
	t.Setenv("EDGEMUX_BENCH_SLOW", "private:2ms@127.0.1.0/24")
	s := loadBenchSlow()
	if s.proto != sniff.Private || s.delay != 2*time.Millisecond || s.from != netip.MustParsePrefix("127.0.1.0/24") {
		t.Errorf("private:2ms@127.0.1.0/24 read as %v %v %v", s.proto, s.delay, s.from)
	}
	t.Setenv("EDGEMUX_BENCH_SLOW", "")
	if s := loadBenchSlow(); s.delay != 0 || s.proto.String() != "invalid" {
		t.Errorf("unset: %v %v, want no protocol", s.proto, s.delay)
	}
	for _, bad := range []string{"modbus", "modbus:5", "nosuch:5ms", "modbus:-1ms", "modbus:2s", "modbus:5ms@", "modbus:5ms@127.0.1.0"} {
		t.Run(bad, func(t *testing.T) {
			t.Setenv("EDGEMUX_BENCH_SLOW", bad)
			defer func() {
				if recover() == nil {
					t.Errorf("%q accepted", bad)
				}
			}()
			loadBenchSlow()
		})
	}
}
