#!/usr/bin/env bash
# stages.sh: the per-stage cost of edgemux's event path, next to a C reference's published
# table. Runs the BenchmarkStage* benchmarks of gateway/stages_bench_test.go
# COUNT times and prints the median and the minimum of each: on a shared
# machine the minimum is the better estimate of what a stage itself costs,
# the median shows what it costs while neighbours compete for the cores.
#
#   examples/bench/stages.sh
#   COUNT=10 BENCHTIME=2s examples/bench/stages.sh
#
# Environment: COUNT (5), BENCHTIME (1s; the wake benchmark always runs
# WAKE_N handoffs per sleeper, default 20000x, since each one waits to be
# a real sleep).

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-1s}
WAKE_N=${WAKE_N:-20000x}
OUT=$(mktemp "${TMPDIR:-/tmp}/edgemux-stages.XXXXXX")
trap 'rm -f "$OUT"' EXIT

cd "$ROOT"
go test -run '^$' -bench 'BenchmarkStage(RegistryLookup|Sniff|Route|Enqueue|ReadAgain)$' -benchmem \
	-benchtime "$BENCHTIME" -count "$COUNT" ./gateway/ >"$OUT"
go test -run '^$' -bench 'BenchmarkStageWake$' -benchmem \
	-benchtime "$WAKE_N" -count "$COUNT" ./gateway/ >>"$OUT"
CPU=$(sed -n 's/^cpu: *//p' "$OUT" | head -1 | sed 's/ *$//')

# stat NAME UNIT median|min: the median or the minimum of UNIT's values on
# NAME's lines.
stat() {
	awk -v name="$1" -v unit="$2" -v what="$3" '
		{ n = $1; sub(/-[0-9]+$/, "", n) }
		n == name { for (i = 3; i <= NF; i++) if ($i == unit) v[c++] = $(i - 1) + 0 }
		END {
			if (c == 0) { print "-"; exit }
			for (i = 0; i < c; i++) for (j = i + 1; j < c; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			if (what == "min") { printf "%.1f\n", v[0]; exit }
			printf "%.1f\n", (c % 2) ? v[int(c / 2)] : (v[c / 2 - 1] + v[c / 2]) / 2
		}' "$OUT"
}

FMT='%-17s %10s %10s %6s %27s   %s\n'
row() { # STAGE BENCHMARK UNIT SEED WHAT
	printf "$FMT" "$1" "$(stat "$2" "$3" median)" "$(stat "$2" "$3" min)" \
		"$(stat "$2" allocs/op median | sed 's/\.0$//')" "$4" "$5"
}

echo "Per-stage cost, $(date -u +%Y-%m-%dT%H:%MZ), $COUNT runs each, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "machine: $CPU, $(nproc) cores, shared (figures are noisy)"
echo "1g: one goroutine, one call; xg: across goroutines, the real worker goroutine on the other side"
printf "$FMT" stage "median ns" "min ns" allocs "C reference ns" "what"
row "registry lookup" BenchmarkStageRegistryLookup ns/op 3.2 "1g: Registry.Lookup(fd, gen)"
row "sniff: modbus" BenchmarkStageSniff/modbus ns/op 17.5 "1g: sniff.Detect, mbpoll read request"
row "sniff: http" BenchmarkStageSniff/http ns/op 17.5 "1g: sniff.Detect, HTTP GET"
row "sniff: private" BenchmarkStageSniff/private ns/op 17.5 "1g: sniff.Detect, HELLO (magic only)"
row "route: conn" BenchmarkStageRoute/pick+release ns/op 48.7 "1g: pool.pick + pool.release, once per connection (entropy, 4 workers)"
row "route: event" BenchmarkStageRoute/observe ns/op "-" "1g: pool.observe, on every event (worker.handle)"
row "enqueue: loop" BenchmarkStageEnqueue loop-ns/event 89.3 "xg: l.deliver per event (Post, ring push, Unpark), batches of 64"
row "enqueue: pipe" BenchmarkStageEnqueue ns/op "-" "xg: per event to the worker's take (Take, observe, read(2) to EAGAIN)"
row "read to EAGAIN" BenchmarkStageReadAgain ns/op "-" "1g: readFD on an empty socket: the syscall each event's read ends with"
row "wake p50" BenchmarkStageWake/chan p50-ns 210 "xg: parked worker (channel): deliver to Session.Data"
row "wake p99" BenchmarkStageWake/chan p99-ns "-" "xg: the same, p99 (the C reference gives none)"
row "wake eventfd p50" BenchmarkStageWake/eventfd p50-ns "-" "xg: the same with an eventfd sleeper"
row "wake eventfd p99" BenchmarkStageWake/eventfd p99-ns "-" "xg: the same, p99"
