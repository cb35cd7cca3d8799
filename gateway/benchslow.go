//go:build benchslow

package gateway

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/edgemux/edgemux/sniff"
)

// A benchmark-only knob: in a binary built with -tags benchslow, the
// environment variable EDGEMUX_BENCH_SLOW=<protocol>:<duration> (say
// modbus:5ms) makes the worker sleep that long before each Data call of
// that protocol's sessions: one protocol's handler turned slow, for the
// mixed-traffic tables (examples/bench/mixed.sh). A production build has
// no such code (benchslow_off.go): no config key or variable can turn it
// on there.
const benchSlowBuild = true

var benchSlow = loadBenchSlow()

func loadBenchSlow() (s struct {
	proto sniff.Proto
	delay time.Duration
}) {
	s.proto = sniff.Proto(255) // no connection has it
	v := os.Getenv("EDGEMUX_BENCH_SLOW")
	if v == "" {
		return s
	}
	name, d, ok := strings.Cut(v, ":")
	delay, err := time.ParseDuration(d)
	if !ok || err != nil || delay <= 0 || delay > time.Second {
		panic(fmt.Sprintf("EDGEMUX_BENCH_SLOW=%q: want <protocol>:<duration up to 1s>, like modbus:5ms", v))
	}
	for p := sniff.Proto(0); p.String() != "invalid"; p++ {
		if p.String() == name {
			s.proto, s.delay = p, delay
			fmt.Fprintf(os.Stderr, "edgemux: benchmark build: every %s Data call sleeps %s first\n", name, delay)
			return s
		}
	}
	panic(fmt.Sprintf("EDGEMUX_BENCH_SLOW=%q: no protocol %q", v, name))
}
