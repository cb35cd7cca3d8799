#!/usr/bin/env bash
# run.sh: memory per idle WebSocket connection and fan-out throughput,
# edgemux vs gorilla/websocket on net/http vs lesismal/nbio, in one run.
#
#   ./run.sh                    # all three, 10,000 connections, 200 publishes
#   ./run.sh gorilla nbio       # a subset, in this order
#   CONNS=2000 PUBLISHES=50 ./run.sh
#   EDGEMUX_CONFIG=my.yaml ./run.sh edgemux   # edgemux with another config
#
# Each server runs as its own process and the load generator as another,
# so neither's memory shows in the other's figures. Every process it
# starts is killed by PID when it ends; every phase is bounded by timeout.
# Loopback only: servers on 127.0.0.1, clients from 127.0.0.2 onwards.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
conns=${CONNS:-10000}
publishes=${PUBLISHES:-200}
servers=("$@")
edgemux_cfg=${EDGEMUX_CONFIG:-$here/edgemux.yaml}
[ ${#servers[@]} -gt 0 ] || servers=(edgemux gorilla nbio)
work=$(mktemp -d /tmp/wscompare.XXXXXX)
results="$work/results.jsonl"
pids=()

cleanup() {
	for pid in "${pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

# stop PID: TERM, then KILL if it lingers (polled, bounded).
stop() {
	local pid=$1
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

# wait_port HOST PORT: poll until something listens (at most 30 s).
wait_port() {
	for _ in $(seq 300); do
		if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

build() {
	log "building into $work/bin"
	# Servers built as edgemux's release is (make release): static,
	# CGO_ENABLED=0, so no server maps libc and its loader (about 1.4 MiB
	# of RssFile a dynamic Go build adds).
	(cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$work/bin/" ./servers/gorilla ./servers/nbio ./client/loadgen)
	if (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$work/bin/edgemux" ./gateway/cmd/edgemux) 2>"$work/edgemux-build.log" &&
		[ -d "$root/protocols/websocket" ]; then
		"$work/bin/edgemux" check -c "$edgemux_cfg" >&2
	else
		log "edgemux does not build (see $work/edgemux-build.log): its column is skipped"
		rm -f "$work/bin/edgemux"
	fi
}

# start NAME: start the server, print "PID PORT METRICS_URL FORCED_GC [GC_URL]".
start() {
	case $1 in
	edgemux)
		"$work/bin/edgemux" run -c "$edgemux_cfg" >"$work/edgemux.log" 2>&1 &
		# /metrics does not collect first; the profiler's ?gc=1 does, so
		# edgemux is measured after a forced GC like the two peers.
		echo "$! 5071 http://127.0.0.1:5071/metrics true http://127.0.0.1:5071/debug/pprof/heap?gc=1" ;;
	gorilla)
		"$work/bin/gorilla" -addr 127.0.0.1:5072 >"$work/gorilla.log" 2>&1 &
		echo "$! 5072 http://127.0.0.1:5072/debug/mem true" ;;
	nbio)
		"$work/bin/nbio" -addr 127.0.0.1:5073 >"$work/nbio.log" 2>&1 &
		echo "$! 5073 http://127.0.0.1:5073/debug/mem true" ;;
	*)
		log "unknown server $1 (edgemux | gorilla | nbio)"; return 1 ;;
	esac
}

bench() {
	local name=$1 pid port metrics forced gcurl
	if [ "$name" = edgemux ] && [ ! -x "$work/bin/edgemux" ]; then
		printf '{"server":"edgemux","note":"not built"}\n' >>"$results"
		return 0
	fi
	read -r pid port metrics forced gcurl < <(start "$name")
	pids+=("$pid")
	if ! wait_port 127.0.0.1 "$port"; then
		log "$name did not listen on $port"; stop "$pid"; return 0
	fi
	log "$name (pid $pid): $conns idle connections, then $publishes publishes"
	# 200 s bounds the run: dials ~20 s, probes <= 45 s, fan-out <= 90 s.
	timeout -k 5 200 "$work/bin/loadgen" -server "$name" -url "ws://127.0.0.1:$port/ws" \
		-conns "$conns" -publishes "$publishes" -pid "$pid" -metrics "$metrics" \
		-forced-gc="$forced" -gc-url "${gcurl:-}" -ready-within 45s -fanout-limit 90s -out "$results" ||
		log "$name: loadgen failed (exit $?); its note says why"
	stop "$pid"
	# Let the TIME_WAIT and the kernel's socket memory of this run settle.
	sleep 2
}

build
for s in "${servers[@]}"; do
	bench "$s"
done
echo
echo "WebSocket comparison: $conns idle connections, fan-out of $publishes publishes; $(date -u +%FT%TZ), $(nproc) cores, $(uname -r)"
"$work/bin/loadgen" report "$results"
log "raw results and server logs in $work"
