#!/usr/bin/env bash
# idlesplit.sh: what an idle edgemux connection costs, split three ways.
# 19,000 private-protocol connections say HELLO and stay silent (one of
# them keeps echoing, as echocompare's load does); per connection:
#   rss   VmRSS after minus before (echocompare's "idle B/conn" is this,
#         measured by the load generator)
#   heap  go_memstats_heap_inuse_bytes after minus before (live objects
#         and garbage not yet collected)
#   live  go_memstats_heap_alloc_bytes after a forced GC minus before:
#         what the connections hold
# rss - heap is pages of tables allocated at start (fd-indexed) that the
# connections touched first; heap - live is garbage. CONNS=1000 for a
# smaller run. Every process it starts is killed by PID when it ends.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
n=${CONNS:-19000}
work=$(mktemp -d /tmp/idlesplit.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done' EXIT
ulimit -n 20000
(cd "$here" && go build -o "$work/echocompare" .)
(cd "$root" && go build -o "$work/edgemux" ./gateway/cmd/edgemux)
# The benchmark's config with the profiler on, for the forced GC.
sed 's/^log:/admin:\n  pprof: true\n\nlog:/' "$here/edgemux.yaml" >"$work/edgemux.yaml"
"$work/edgemux" run -c "$work/edgemux.yaml" >"$work/edgemux.log" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:5080/healthz && break; sleep 0.1; done
metric() { curl -s http://127.0.0.1:5080/metrics | awk -v k="$1" '$1==k{printf "%d", $2}'; }
rss() { awk '/^VmRSS/{print $2*1024}' "/proc/$pid/status"; }
r0=$(rss) h0=$(metric go_memstats_heap_inuse_bytes) a0=$(metric go_memstats_heap_alloc_bytes)
"$work/echocompare" load -server edgemux -addr 127.0.0.1:5080 -pid "$pid" -conns "$n" -active 1 \
	-size 64 -duration 8s -out "$work/load.json" 2>"$work/load.log" &
pids+=("$!")
for _ in $(seq 240); do [ "$(ls "/proc/$pid/fd" | wc -l)" -ge "$n" ] && break; sleep 0.5; done
sleep 3
r1=$(rss) h1=$(metric go_memstats_heap_inuse_bytes)
curl -s -o /dev/null "http://127.0.0.1:5080/debug/pprof/heap?gc=1"
a2=$(metric go_memstats_heap_alloc_bytes)
echo "$n idle connections, per connection: rss $(((r1 - r0) / n)) B, heap $(((h1 - h0) / n)) B, live $(((a2 - a0) / n)) B; load average $(cut -d' ' -f1-3 /proc/loadavg)"
