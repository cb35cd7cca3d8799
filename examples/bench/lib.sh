# Shared helpers for the bench scripts; sourced, not run.
#
# Every process a script starts is recorded in BENCH_PIDS and ended by
# bench_cleanup (on EXIT): TERM, a bounded wait, then KILL, by pid only.

set -euo pipefail

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_WORK=$(mktemp -d "${TMPDIR:-/tmp}/edgemux-bench.XXXXXX")
BENCH_PIDS=()

bench_cleanup() {
	local pid
	for pid in "${BENCH_PIDS[@]}"; do
		bench_stop "$pid"
	done
	rm -rf "$BENCH_WORK"
}
trap bench_cleanup EXIT
trap 'exit 143' TERM INT # so that the EXIT trap runs on a signal too

# bench_stop PID: SIGTERM, wait up to 20 s, then SIGKILL.
bench_stop() {
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# bench_build: edgemux, loadgen and gopercon into $BENCH_WORK.
bench_build() {
	(cd "$BENCH_ROOT" &&
		go build -o "$BENCH_WORK/edgemux" ./gateway/cmd/edgemux &&
		go build -o "$BENCH_WORK/loadgen" ./examples/loadgen &&
		go build -o "$BENCH_WORK/gopercon" ./examples/bench/gopercon)
}

# bench_scrape URL FILE: fetch /metrics into FILE.
bench_scrape() {
	curl -fsS --max-time 30 "$1" -o "$2"
}

# bench_metric FILE NAME [LABEL-FILTER]: sum of the samples of series NAME
# (optionally only lines containing LABEL-FILTER), as an integer.
bench_metric() {
	awk -v name="$2" -v filt="${3:-}" '
		$1 == name || index($1, name "{") == 1 {
			if (filt == "" || index($0, filt) > 0) sum += $NF
		}
		END { printf "%.0f\n", sum }' "$1"
}

# bench_wait_for DESCRIPTION LIMIT-SECONDS COMMAND...: poll COMMAND every
# 0.2 s until it succeeds; fail after the limit (a hang guard, not a
# performance assertion).
bench_wait_for() {
	local what=$1 limit=$2 i
	shift 2
	for ((i = 0; i < limit * 5; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	echo "bench: gave up waiting for $what after ${limit}s" >&2
	return 1
}

# bench_cpu_seconds PID: user+system CPU time of PID from /proc/PID/stat.
bench_cpu_seconds() {
	local tck
	tck=$(getconf CLK_TCK)
	# Fields after the ")" that closes comm: utime is the 12th, stime the 13th.
	awk -v tck="$tck" '{ sub(/.*\) /, ""); printf "%.2f\n", ($12 + $13) / tck }' "/proc/$1/stat"
}

# bench_rss PID: resident set size of PID in bytes, from /proc/PID/status.
bench_rss() {
	awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"
}
