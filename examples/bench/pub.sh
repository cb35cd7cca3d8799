#!/usr/bin/env bash
# pub.sh: private-protocol PUB throughput through edgemux at 1k and 10k
# connections, for each dispatch policy (entropy, roundrobin, inline).
#
# For every (policy, connection count) it starts a fresh edgemux process
# with dispatch.policy set, runs `loadgen -mode pub` (CONNS publishers
# writing PUB frames with msg id 0 back to back, or at RATE in all, for
# DURATION; SUBS subscribers on "lg/<i>/#" so that each message matches
# one subscription), and prints publishes/s, deliveries/s, the bus's
# dropped count and the CPU seconds edgemux used while publishing (from
# /proc/PID/stat, sampled between loadgen's "up" and its exit). loadgen
# runs on the same two cores and its own CPU is printed too.
#
#   examples/bench/pub.sh
#   POLICIES=entropy CONN_COUNTS="1000" DURATION=5s examples/bench/pub.sh
#
# Environment: POLICIES ("entropy roundrobin inline"), CONN_COUNTS
# ("1000 10000"), DURATION (10s), SIZE (32), SUBS (4), RATE (0 = as fast as
# possible), WRITERS (2) and BATCH (1): loadgen's writer goroutines and
# PUB frames per write, SOURCES (32), PORT (15030), POOL_WORKERS (2):
# workers of the private pool.

source "$(dirname "$0")/lib.sh"

POLICIES=${POLICIES:-entropy roundrobin inline}
CONN_COUNTS=${CONN_COUNTS:-1000 10000}
DURATION=${DURATION:-10s}
SIZE=${SIZE:-32}
SUBS=${SUBS:-4}
RATE=${RATE:-0}
WRITERS=${WRITERS:-2}
BATCH=${BATCH:-1}
SOURCES=${SOURCES:-32}
PORT=${PORT:-15030}
POOL_WORKERS=${POOL_WORKERS:-2}

bench_build

# config POLICY: a YAML file for one run.
config() {
	local f="$BENCH_WORK/pub-$1.yaml"
	cat >"$f" <<EOF
listen: 127.0.0.1:$PORT
limits:
  max_conns: 19000
  max_conns_per_ip: 19000
  max_sniffing: 4096
  max_sniffing_per_ip: 1024
dispatch:
  policy: $1
pools:
  private:
    workers: $POOL_WORKERS
private:
  hello_within: 60s
log:
  level: warn
EOF
	echo "$f"
}

# field LINE KEY: the value of KEY=... in a loadgen line.
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

ROWS=()
run_one() {
	local policy=$1 conns=$2 out="$BENCH_WORK/pub-$1-$2.out" metrics="$BENCH_WORK/pub-$1-$2.metrics"
	local cfg pid lg cpu0 cpu1 line dropped
	cfg=$(config "$policy")
	"$BENCH_WORK/edgemux" run -c "$cfg" 2>"$BENCH_WORK/edgemux-$policy-$conns.log" &
	pid=$!
	BENCH_PIDS+=("$pid")
	bench_wait_for "edgemux ($policy)" 60 bench_scrape "http://127.0.0.1:$PORT/metrics" "$metrics"
	"$BENCH_WORK/loadgen" -mode pub -addr "127.0.0.1:$PORT" -conns "$conns" -subs "$SUBS" \
		-sources "$SOURCES" -duration "$DURATION" -size "$SIZE" -rate "$RATE" -delay 2s \
		-writers "$WRITERS" -batch "$BATCH" \
		-timeout 60s >"$out" 2>&1 &
	lg=$!
	BENCH_PIDS+=("$lg")
	bench_wait_for "loadgen up ($policy, $conns)" 600 grep -q '^up ' "$out"
	cpu0=$(bench_cpu_seconds "$pid")
	wait "$lg" || { echo "loadgen failed:" >&2; cat "$out" >&2; return 1; }
	cpu1=$(bench_cpu_seconds "$pid")
	bench_scrape "http://127.0.0.1:$PORT/metrics" "$metrics"
	dropped=$(bench_metric "$metrics" edgemux_bus_messages_total 'event="dropped"')
	bench_stop "$pid"
	line=$(grep '^result ' "$out")
	grep -E '^(up|first-error)' "$out" | sed "s/^/  $policy $conns: /"
	echo "  $policy $conns: $line"
	ROWS+=("$(printf '%-10s %6s %6s %12s %12s %10s %10s %9s %9s' "$policy" "$conns" \
		"$(field "$line" open)" "$(field "$line" pub_per_s)" "$(field "$line" deliv_per_s)" \
		"$dropped" "$(field "$line" write_errors)/$(field "$line" sub_errors)/$(field "$line" subs_slow)" \
		"$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }')" \
		"$(field "$line" loadgen_cpu_s)")")
}

for conns in $CONN_COUNTS; do
	for policy in $POLICIES; do
		echo "== policy=$policy conns=$conns"
		run_one "$policy" "$conns"
	done
done

echo
echo "PUB throughput, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, shared machine;" \
	"duration $DURATION, payload $SIZE B, $SUBS subscribers, rate $RATE (0 = unlimited)," \
	"loadgen $WRITERS writers, $BATCH frame(s) per write"
printf '%-10s %6s %6s %12s %12s %10s %10s %9s %9s\n' policy conns open publishes/s deliveries/s \
	"bus drops" "err w/s/slow" "edgemux s" "loadgen s"
printf '%s\n' "${ROWS[@]}"
echo "(edgemux s / loadgen s: CPU seconds used while publishing, both on the same $(nproc) cores;"
echo " err w/s/slow: publisher write errors / subscriber errors / subscribers dropped as slow consumers)"
