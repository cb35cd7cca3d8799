//go:build benchslow

package gateway

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/edgemux/edgemux/sniff"
)

// A benchmark-only knob: in a binary built with -tags benchslow, the
// environment variable EDGEMUX_BENCH_SLOW=<protocol>:<duration> (say
// modbus:5ms) makes the worker sleep that long before each Data call of
// that protocol's sessions: one protocol's handler turned slow, for the
// mixed-traffic tables (examples/bench/mixed.sh). With @<prefix> after it
// (private:5ms@127.0.1.0/24) only the sessions whose peer is in the
// prefix are slow: some devices whose messages cost their worker real
// time, for the placement benchmark (examples/bench/placement). A
// production build has no such code (benchslow_off.go): no config key or
// variable can turn it on there.
const benchSlowBuild = true

var benchSlow = loadBenchSlow()

// benchSlowFor reports whether c's Data calls are slowed.
func benchSlowFor(c *conn) bool {
	return c.proto == benchSlow.proto && (!benchSlow.from.IsValid() || benchSlow.from.Contains(c.Peer().Addr()))
}

func loadBenchSlow() (s struct {
	proto sniff.Proto
	delay time.Duration
	from  netip.Prefix
}) {
	s.proto = sniff.Proto(255) // no connection has it
	v := os.Getenv("EDGEMUX_BENCH_SLOW")
	if v == "" {
		return s
	}
	const want = "want <protocol>:<duration up to 1s>[@<prefix>], like modbus:5ms or private:5ms@127.0.1.0/24"
	v, from, scoped := strings.Cut(v, "@")
	if scoped {
		p, err := netip.ParsePrefix(from)
		if err != nil {
			panic(fmt.Sprintf("EDGEMUX_BENCH_SLOW: %v; %s", err, want))
		}
		s.from = p
	}
	name, d, ok := strings.Cut(v, ":")
	delay, err := time.ParseDuration(d)
	if !ok || err != nil || delay <= 0 || delay > time.Second {
		panic(fmt.Sprintf("EDGEMUX_BENCH_SLOW=%q: %s", v, want))
	}
	for p := sniff.Proto(0); p.String() != "invalid"; p++ {
		if p.String() == name {
			s.proto, s.delay = p, delay
			fmt.Fprintf(os.Stderr, "edgemux: benchmark build: every %s Data call (from %v) sleeps %s first\n", name, s.from, delay)
			return s
		}
	}
	panic(fmt.Sprintf("EDGEMUX_BENCH_SLOW=%q: no protocol %q", v, name))
}
