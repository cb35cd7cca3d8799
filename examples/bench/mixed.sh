#!/usr/bin/env bash
# mixed.sh: the mixed-traffic tables. For each dispatch policy (inline,
# roundrobin, entropy: seed 002's Baseline / RoundRobin / MultiPath), each
# connection count and each mode (as is; one protocol's handler 5 ms slow),
# it starts edgemux (built with -tags benchslow) as its own process and
# one examples/mixload process per protocol (Modbus FC3, WebSocket
# heartbeats, WebSocket publishes, private PUB, reliable UDP, CoAP over
# UDP), all sending open loop in one shared window, and prints per
# protocol QPS and p50/p99/p99.9 latency from the scheduled send time, and
# for the server its CPU, RSS and context switches over the window
# (/proc/PID/stat and /proc/PID/status), plus the sampled stage times and
# the turns loops ran for each pool's workers (lent turns, since start).
#
#   examples/bench/mixed.sh                           # the full tables
#   CONNS_LIST=1000 DURATION=10s examples/bench/mixed.sh   # a smoke run
#
# Environment: CONNS_LIST ("1000 5000 10000 19000", connections in all,
# split evenly over the six protocols; CoAP and rudp ones are UDP peers),
# POLICIES ("inline roundrobin entropy"), MODES ("asis slow"), SLOW
# (modbus:5ms, the EDGEMUX_BENCH_SLOW of the slow mode), RATE_PER_CONN (1
# request per second per connection), DURATION (20s), STAGE_SAMPLE (128;
# 0 turns the stage timestamps off, to see what they cost), LEND_BELOW
# (dispatch.lend_below; 50us, the default; 0s turns lent turns off), OUT (a file
# under examples/bench/results/ to append the tables to; default prints
# only).

source "$(dirname "$0")/lib.sh"

CONNS_LIST=${CONNS_LIST:-"1000 5000 10000 19000"}
POLICIES=${POLICIES:-"inline roundrobin entropy"}
MODES=${MODES:-"asis slow"}
SLOW=${SLOW:-modbus:5ms}
RATE_PER_CONN=${RATE_PER_CONN:-1}
DURATION=${DURATION:-20s}
STAGE_SAMPLE=${STAGE_SAMPLE:-128}
LEND_BELOW=${LEND_BELOW:-50us}
PORT=${PORT:-25830}
PROTOS="modbus ws-ping ws-pub private rudp coap"
NPROTOS=6
OUT=${OUT:-/dev/null}

(cd "$BENCH_ROOT" &&
	go build -tags benchslow -o "$BENCH_WORK/edgemux" ./gateway/cmd/edgemux &&
	go build -o "$BENCH_WORK/mixload" ./examples/mixload)

# config POLICY: the gateway's config for one run.
config() {
	local f="$BENCH_WORK/edgemux-$1.yaml"
	cat >"$f" <<YAML
listen: 127.0.0.1:$PORT
limits:
  max_conns: 19500
  max_conns_per_ip: 19500
  max_sniffing: 4096
  max_sniffing_per_ip: 4096
dispatch:
  policy: $1
  lend_below: $LEND_BELOW
admin:
  stage_sample: $STAGE_SAMPLE
private:
  hello_within: 60s
modbus:
  no_value: zero
  tags:
    - {topic: mix/hr0, table: holding, address: 0, type: uint16}
log:
  level: warn
YAML
	echo "$f"
}

# proc_status PID FIELD: a counter of /proc/PID/task/*/status summed over
# the process's threads (the process's own status holds its main thread's).
proc_status() { cat /proc/"$1"/task/*/status 2>/dev/null | awk -v f="$2:" '$1 == f { n += $2 } END { print n + 0 }'; }

# run POLICY CONNS MODE: one run; prints its rows.
run() {
	local policy=$1 conns=$2 mode=$3 per=$(($2 / NPROTOS)) rate secs gw p at
	rate=$((per * RATE_PER_CONN))
	((rate > 0)) || rate=1
	local slow=""
	[[ $mode == slow ]] && slow=$SLOW
	local log="$BENCH_WORK/gw-$policy-$conns-$mode.log"
	EDGEMUX_BENCH_SLOW=$slow "$BENCH_WORK/edgemux" run -c "$(config "$policy")" 2>"$log" &
	gw=$!
	BENCH_PIDS+=("$gw")
	bench_wait_for "edgemux to listen" 30 curl -fsS "http://127.0.0.1:$PORT/healthz"
	# Dials take about a second per 2,000 connections here; start the
	# window when all should be up.
	at=$(($(date +%s%3N) + 4000 + conns))
	local pids=()
	for p in $PROTOS; do
		"$BENCH_WORK/mixload" -addr "127.0.0.1:$PORT" -proto "$p" -conns "$per" -rate "$rate" \
			-duration "$DURATION" -at "$at" -timeout 30s >"$BENCH_WORK/ml-$p.out" 2>&1 &
		pids+=("$!")
		BENCH_PIDS+=("$!")
	done
	while (($(date +%s%3N) < at)); do sleep 0.05; done
	local cpu0 vol0 nvol0 t0 rss=0 r
	cpu0=$(bench_cpu_seconds "$gw")
	vol0=$(proc_status "$gw" voluntary_ctxt_switches)
	nvol0=$(proc_status "$gw" nonvoluntary_ctxt_switches)
	t0=$(date +%s%3N)
	# Peak RSS over the window, sampled each half second.
	while :; do
		r=$(bench_rss "$gw")
		((r > rss)) && rss=$r
		local alive=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		((alive)) || break
		sleep 0.5
	done
	local cpu1 vol1 nvol1 t1
	cpu1=$(bench_cpu_seconds "$gw")
	vol1=$(proc_status "$gw" voluntary_ctxt_switches)
	nvol1=$(proc_status "$gw" nonvoluntary_ctxt_switches)
	t1=$(date +%s%3N)
	for p in "${pids[@]}"; do wait "$p" || true; done
	for p in $PROTOS; do
		local line
		line=$(grep '^result ' "$BENCH_WORK/ml-$p.out" || true)
		if [[ -z $line ]]; then
			printf "%-10s %6s %-5s %-8s %s\n" "$policy" "$conns" "$mode" "$p" "FAILED: $(tail -1 "$BENCH_WORK/ml-$p.out")"
			continue
		fi
		echo "$line" | awk -v pol="$policy" -v conns="$conns" -v mode="$mode" '{
			for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			printf "%-10s %6s %-5s %-8s %6s %8s %8s %9s %7s %6s\n", pol, conns, mode, v["proto"], v["qps"],
				v["p50_us"], v["p99_us"], v["p999_us"], v["errors"], v["late"]
		}'
	done
	awk -v pol="$policy" -v conns="$conns" -v mode="$mode" -v cpu0="$cpu0" -v cpu1="$cpu1" \
		-v ms=$((t1 - t0)) -v rss="$rss" -v vol=$((vol1 - vol0)) -v nvol=$((nvol1 - nvol0)) 'BEGIN {
		s = ms / 1000; cpu = cpu1 - cpu0
		printf "%-10s %6s %-5s %-8s cpu %.0f%% of a core, peak RSS %.1f MiB, ctx switches/s voluntary %.0f nonvoluntary %.0f (window %.1f s)\n",
			pol, conns, mode, "server", 100 * cpu / s, rss / 1048576, vol / s, nvol / s, s
	}'
	curl -fsS "http://127.0.0.1:$PORT/api/stats" | /usr/bin/python3 -c '
import json, sys
doc = json.load(sys.stdin)
st = doc["stages"]
order = ["epoll_wait", "registry_lookup", "sniff", "route", "enqueue", "wake", "handler"]
print("%-10s %6s %-5s %-8s p50/p99 ns: %s" % (sys.argv[1], sys.argv[2], sys.argv[3], "stages",
	"  ".join("%s %d/%d (n=%d)" % (k, st[k]["p50_ns"], st[k]["p99_ns"], st[k]["count"]) for k in order)))
lent = {}
for w in doc["workers"]:
	lent[w["pool"]] = lent.get(w["pool"], 0) + w.get("lent_turns", 0)
print("%-10s %6s %-5s %-8s since start: %s" % (sys.argv[1], sys.argv[2], sys.argv[3], "lent",
	"  ".join("%s %d" % kv for kv in sorted(lent.items()))))
' "$policy" "$conns" "$mode"
	bench_stop "$gw"
}

{
	echo "Mixed traffic, $(date -u +%Y-%m-%dT%H:%MZ), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(uname -sr)"
	echo "open loop, $RATE_PER_CONN request/s per connection, $DURATION per run, connections split evenly over: $PROTOS"
	echo "slow mode: EDGEMUX_BENCH_SLOW=$SLOW (benchslow build); admin.stage_sample: $STAGE_SAMPLE; dispatch.lend_below: $LEND_BELOW; latencies in us from the scheduled send time"
	printf "%-10s %6s %-5s %-8s %6s %8s %8s %9s %7s %6s\n" policy conns mode proto qps p50_us p99_us p99.9_us errors late
	for conns in $CONNS_LIST; do
		for mode in $MODES; do
			for policy in $POLICIES; do
				run "$policy" "$conns" "$mode"
			done
		done
	done
	echo "load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$OUT"
