#!/usr/bin/env bash
# idle.sh: what an idle private-protocol connection costs edgemux, next to
# a goroutine-per-connection Go server measured the same way.
#
# For each server (edgemux, then examples/bench/gopercon) it starts the
# server as a separate process, scrapes its metrics (baseline RSS,
# go_memstats_heap_inuse_bytes, goroutines), runs `loadgen -mode idle`
# with CONNS connections spread over SOURCES source addresses (each says
# HELLO and gets its ACK), waits until the server counts them all, scrapes
# again and prints the deltas per connection. Everything it starts is
# stopped on exit.
#
#   examples/bench/idle.sh                   # 19,000 connections
#   CONNS=5000 examples/bench/idle.sh        # a lighter run
#
# Environment: CONNS (19000), SOURCES (64), PORT (15020, edgemux),
# GOPORT (15021) and GOMETRICS (15022) for the baseline, SETTLE (3, seconds
# between "all up" and the second scrape).

source "$(dirname "$0")/lib.sh"

CONNS=${CONNS:-19000}
SOURCES=${SOURCES:-64}
PORT=${PORT:-15020}
GOPORT=${GOPORT:-15021}
GOMETRICS=${GOMETRICS:-15022}
SETTLE=${SETTLE:-3}

bench_build

cat >"$BENCH_WORK/idle.yaml" <<EOF
listen: 127.0.0.1:$PORT
limits:
  max_conns: 19500
  max_conns_per_ip: 19500
  max_sniffing: 4096
  max_sniffing_per_ip: 1024
pools:
  private:
    idle_timeout: 0s     # idle is the point here
private:
  hello_within: 60s
log:
  level: warn
EOF

# measure NAME PID METRICS-URL CONN-SERIES CONN-FILTER LOADGEN-ADDR:
# runs the idle load against a started server and sets the globals
# R_<field> for the table.
measure() {
	local name=$1 pid=$2 url=$3 series=$4 filter=$5 addr=$6
	local before="$BENCH_WORK/$name.before" after="$BENCH_WORK/$name.after" out="$BENCH_WORK/$name.loadgen"
	bench_wait_for "$name metrics" 60 bench_scrape "$url" "$before"
	sleep 1
	bench_scrape "$url" "$before"
	local rss0 heap0 gor0
	rss0=$(bench_rss "$pid")
	heap0=$(bench_metric "$before" go_memstats_heap_inuse_bytes)
	gor0=$(bench_metric "$before" go_goroutines)

	"$BENCH_WORK/loadgen" -mode idle -addr "$addr" -conns "$CONNS" -sources "$SOURCES" \
		-hold 900s -timeout 60s >"$out" 2>&1 &
	local lg=$!
	BENCH_PIDS+=("$lg")
	bench_wait_for "$name: loadgen up" 900 grep -q '^up ' "$out"
	local open
	open=$(sed -n 's/^up .* open=\([0-9]*\).*/\1/p' "$out")
	conns_at_least() {
		bench_scrape "$url" "$after" && (($(bench_metric "$after" "$series" "$filter") >= open))
	}
	bench_wait_for "$name to count $open connections" 120 conns_at_least
	sleep "$SETTLE"
	bench_scrape "$url" "$after"
	local rss1 heap1 gor1 seen
	rss1=$(bench_rss "$pid")
	heap1=$(bench_metric "$after" go_memstats_heap_inuse_bytes)
	gor1=$(bench_metric "$after" go_goroutines)
	seen=$(bench_metric "$after" "$series" "$filter")
	bench_stop "$lg"
	grep -E '^(result|first-error)' "$out" | sed "s/^/  $name loadgen: /"
	printf -v "R_${name}" '%s' "$seen $rss0 $rss1 $heap0 $heap1 $gor0 $gor1"
}

echo "== edgemux"
"$BENCH_WORK/edgemux" run -c "$BENCH_WORK/idle.yaml" 2>"$BENCH_WORK/edgemux.log" &
EDGEMUX=$!
BENCH_PIDS+=("$EDGEMUX")
measure edgemux "$EDGEMUX" "http://127.0.0.1:$PORT/metrics" edgemux_connections 'protocol="private"' "127.0.0.1:$PORT"
bench_stop "$EDGEMUX"

echo "== gopercon (goroutine per connection, 4 KiB read buffer)"
"$BENCH_WORK/gopercon" -addr "127.0.0.1:$GOPORT" -metrics "127.0.0.1:$GOMETRICS" 2>"$BENCH_WORK/gopercon.log" &
GOPERCON=$!
BENCH_PIDS+=("$GOPERCON")
measure gopercon "$GOPERCON" "http://127.0.0.1:$GOMETRICS/metrics" gopercon_connections '' "127.0.0.1:$GOPORT"
bench_stop "$GOPERCON"

echo
echo "Idle connections, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, shared machine"
printf '%-10s %7s %10s %10s %9s %10s %9s %12s\n' server conns "RSS delta" "RSS B/conn" \
	"heap delta" "heap B/conn" "gor.after" "gor.before"
row() {
	local name=$1 conns rss0 rss1 heap0 heap1 gor0 gor1
	read -r conns rss0 rss1 heap0 heap1 gor0 gor1 <<<"$2"
	awk -v n="$name" -v c="$conns" -v r0="$rss0" -v r1="$rss1" -v h0="$heap0" -v h1="$heap1" \
		-v g0="$gor0" -v g1="$gor1" 'BEGIN {
		if (c < 1) c = 1
		printf "%-10s %7d %9.1fM %10.0f %9.1fM %11.0f %9d %12d\n", n, c, (r1-r0)/1048576, (r1-r0)/c,
			(h1-h0)/1048576, (h1-h0)/c, g1, g0 }'
}
row edgemux "$R_edgemux"
row gopercon "$R_gopercon"
awk -v e="$R_edgemux" -v g="$R_gopercon" 'BEGIN {
	split(e, a, " "); split(g, b, " ")
	er = (a[3]-a[2])/a[1]; gr = (b[3]-b[2])/b[1]; eh = (a[5]-a[4])/a[1]; gh = (b[5]-b[4])/b[1]
	printf "ratio edgemux/gopercon: RSS %.2f, heap %.2f\n", (gr ? er/gr : 0), (gh ? eh/gh : 0) }'
echo
echo "Reference figures from the issue (NOT measured here):"
echo "  goal          <= 600 B per idle connection"
echo "  gnet             510 B per idle connection"
echo "  nbio             469 B per idle connection"
echo "  goroutine-per-connection  3.6-7.8 KB per idle connection"
