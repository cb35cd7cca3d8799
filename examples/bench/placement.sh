#!/usr/bin/env bash
# placement.sh: the adversarial placement benchmark (examples/bench/placement)
# under roundrobin, leastconns and entropy in one run. Extra arguments go to
# the generator (e.g. -duration 30s -bursty 16).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(cd "$BENCH_ROOT" &&
	go build -o "$BENCH_WORK/edgemux" ./gateway/cmd/edgemux &&
	go build -o "$BENCH_WORK/placement" ./examples/bench/placement)
echo "uptime: $(uptime)"
"$BENCH_WORK/placement" -edgemux "$BENCH_WORK/edgemux" "$@" &
BENCH_PIDS+=("$!")
wait "$!"
