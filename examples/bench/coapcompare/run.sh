#!/usr/bin/env bash
# run.sh: CoAP over UDP, edgemux vs go-coap's own UDP server, in one run:
# memory per idle peer at 10,000 peers (on the fresh server), GET requests
# per second from 100 and from 2,000 peers (closed loop, one request
# outstanding per peer), and RSS under a flood of ever-new sources.
#
#   ./run.sh                      # both servers, 10 s loads, a 60 s flood
#   DURATION=5s FLOOD=20s ./run.sh gocoap
#
# Each server runs as its own process pinned to core 0 (taskset), the load
# generator as another pinned to core 1. Every process it starts is ended
# by PID (lib.sh). Loopback only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
source "$here/../lib.sh"
duration=${DURATION:-10s}
flood_for=${FLOOD:-60s}
servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(edgemux gocoap)
bin=$BENCH_WORK/coapcompare
(cd "$here" && go build -o "$bin" .)
ulimit -n "$(ulimit -Hn)"

# rss PID: resident bytes, as an integer (lib.sh's bench_rss prints large
# values in awk's exponent form, which shell arithmetic cannot read).
rss() { awk '/^VmRSS:/ { printf "%d\n", $2 * 1024 }' "/proc/$1/status"; }

printf '%-8s %12s %12s %14s %14s %16s\n' server rps_100 rps_2000 rss_idle_MB B_per_idle_peer flood_rss_MB
for impl in "${servers[@]}"; do
	out=$BENCH_WORK/$impl.out
	taskset -c 0 "$bin" serve -impl "$impl" >"$out" 2>&1 &
	pid=$!
	BENCH_PIDS+=("$pid")
	bench_wait_for "$impl to listen" 30 grep -q '^listening' "$out"
	addr=$(awk '/^listening/ { print $2 }' "$out")
	rps() { taskset -c 1 "$bin" load -addr "$addr" -peers "$1" -duration "$duration" | sed -n 's/.* rps=\([0-9]*\).*/\1/p'; }
	# Idle peers first, on the fresh server: after a load its heap is
	# already grown and 10,000 more peers would seem free.
	base=$(rss "$pid")
	idle_out=$BENCH_WORK/$impl.idle
	taskset -c 1 "$bin" idle -addr "$addr" -peers 10000 >"$idle_out" 2>&1 &
	idle_pid=$!
	BENCH_PIDS+=("$idle_pid")
	bench_wait_for "10,000 idle peers" 120 grep -q '^up' "$idle_out"
	held=$(rss "$pid")
	per_peer=$(( (held - base) / 10000 ))
	bench_stop "$idle_pid"
	rps100=$(rps 100)
	rps2000=$(rps 2000)
	# The flood: RSS sampled every 5 s, every sample printed.
	taskset -c 1 "$bin" flood -addr "$addr" -duration "$flood_for" >"$BENCH_WORK/$impl.flood" 2>&1 &
	flood_pid=$!
	BENCH_PIDS+=("$flood_pid")
	samples=()
	while kill -0 "$flood_pid" 2>/dev/null; do
		samples+=("$(( $(rss "$pid") / 1048576 ))")
		sleep 5
	done
	wait "$flood_pid" || true
	printf '%-8s %12s %12s %14s %14s %16s\n' "$impl" "$rps100" "$rps2000" "$(( held / 1048576 ))" "$per_peer" "$(IFS=,; echo "${samples[*]}")"
	echo "  $(cat "$idle_out" | head -1); flood: $(cat "$BENCH_WORK/$impl.flood")" >&2
	bench_stop "$pid"
done
