#!/usr/bin/env bash
# placement.sh: the adversarial placement benchmark (examples/bench/placement)
# under roundrobin, leastconns and entropy in one run, twice: with the
# production binary (a bursty device's PING costs what a PING costs), then
# with a -tags benchslow binary where each bursty message costs its worker
# SLOW (default 2ms) of handler time. Extra arguments go to the generator
# in both runs (e.g. -duration 30s -bursty 16).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(cd "$BENCH_ROOT" &&
	go build -o "$BENCH_WORK/edgemux" ./gateway/cmd/edgemux &&
	go build -tags benchslow -o "$BENCH_WORK/edgemux-benchslow" ./gateway/cmd/edgemux &&
	go build -o "$BENCH_WORK/placement" ./examples/bench/placement)
echo "uptime: $(uptime)"
"$BENCH_WORK/placement" -edgemux "$BENCH_WORK/edgemux" "$@" &
BENCH_PIDS+=("$!")
wait "$!"
"$BENCH_WORK/placement" -edgemux "$BENCH_WORK/edgemux-benchslow" -slow "${SLOW:-2ms}" "$@" &
BENCH_PIDS+=("$!")
wait "$!"
echo "uptime: $(uptime)"
