#!/usr/bin/env bash
# run.sh: the same echo server four ways, in one run: edgemux, Go net
# (goroutine per connection), gnet v2 and nbio. Every row of every server:
# a fresh server process, then the load generator in a process of its own.
#
#   ./run.sh                         # all rows, all servers, pinned and default
#   ./run.sh gnet edgemux            # a subset of the servers, in this order
#   ./run.sh edgemux nbio nbio-percore   # nbio also with one poller per core the server may use
#                                     # (its defaults start one per four cores, at least one)
#   ROWS="1000/1000" SIZES="64" PINS="pinned" DURATION=2s ./run.sh   # a smoke run
#   MODE=open RATE=20000 ./run.sh    # open loop at 20,000 requests/s in all
#   CONNECT_CLIENTS=32 ./run.sh       # the connect row's clients (CONNECT=0: no row)
#   SYSCALLS=0 ./run.sh              # no perf stat (default: count system calls when perf is there)
#   REPEAT=3 ./run.sh                # every row three times, servers alternated; the report gives medians
#
# pinned: the server on CPU 0 (taskset), the load generator on CPU 1;
# default: both wherever the scheduler puts them. Loopback only: servers on
# 127.0.0.1, clients from 127.0.0.2-9. Every process it starts is killed by
# PID when it ends; every phase is bounded by timeout.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
rows=(${ROWS:-1000/1000 19000/1000 19000/50})
sizes=(${SIZES:-64 1024})
pins=(${PINS:-pinned default})
mode=${MODE:-closed}
rate=${RATE:-20000}
duration=${DURATION:-5s}
repeat=${REPEAT:-1}
servers=("$@")
syscalls=false
if [ "${SYSCALLS:-1}" != 0 ] && command -v perf >/dev/null; then
	syscalls=true
fi
[ ${#servers[@]} -gt 0 ] || servers=(edgemux gonet gnet nbio)
work=$(mktemp -d /tmp/echocompare.XXXXXX)
results="$work/results.jsonl"
pids=()
ulimit -n 20000

cleanup() {
	for pid in "${pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

stop() {
	local pid=$1
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

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
	(cd "$here" && go build -o "$work/bin/echocompare" .)
	(cd "$root" && go build -o "$work/bin/edgemux" ./gateway/cmd/edgemux)
	"$work/bin/edgemux" check -c "$here/edgemux.yaml" >&2
}

port_of() {
	case $1 in
	edgemux) echo 5080 ;; gonet) echo 5081 ;; gnet) echo 5082 ;; nbio) echo 5083 ;; nbio-percore) echo 5084 ;;
	*) log "unknown server $1 (edgemux | gonet | gnet | nbio | nbio-percore)"; return 1 ;;
	esac
}

# start NAME PIN: start the server, print its PID.
start() {
	local name=$1 pin=$2 port prefix=()
	port=$(port_of "$name")
	[ "$pin" = pinned ] && prefix=(taskset -c 0)
	if [ "$name" = edgemux ]; then
		"${prefix[@]}" "$work/bin/edgemux" run -c "$here/edgemux.yaml" >>"$work/edgemux.log" 2>&1 &
	elif [ "$name" = nbio-percore ]; then
		local cores
		cores=$(nproc)
		[ "$pin" = pinned ] && cores=1
		"${prefix[@]}" "$work/bin/echocompare" serve nbio -pollers "$cores" -addr "127.0.0.1:$port" >>"$work/$name.log" 2>&1 &
	else
		"${prefix[@]}" "$work/bin/echocompare" serve "$name" -addr "127.0.0.1:$port" >>"$work/$name.log" 2>&1 &
	fi
	echo $!
}

bench() {
	local name=$1 pin=$2 row=$3 size=$4 pid port prefix=()
	port=$(port_of "$name")
	# A server left from an earlier run would answer in this one's place
	# (edgemux now refuses a taken port; this also covers the peers).
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		log "port $port is taken before $name starts: stop whatever listens there"; exit 1
	fi
	pid=$(start "$name" "$pin")
	pids+=("$pid")
	if ! wait_port 127.0.0.1 "$port" || ! kill -0 "$pid" 2>/dev/null; then
		log "$name did not listen on $port"; stop "$pid"; return 0
	fi
	[ "$pin" = pinned ] && prefix=(taskset -c 1)
	log "$name ($pin, pid $pid): $row connections/active, $size B, $mode loop"
	timeout -k 5 180 "${prefix[@]}" "$work/bin/echocompare" load -server "$name" -pin "$pin" \
		-addr "127.0.0.1:$port" -pid "$pid" -conns "${row%/*}" -active "${row#*/}" -size "$size" \
		-mode "$mode" -rate "$rate" -duration "$duration" -syscalls="$syscalls" -out "$results" ||
		log "$name: load failed (exit $?)"
	stop "$pid"
	sleep 1 # let the kernel's socket memory of this run settle
}

build
for pin in "${pins[@]}"; do
	for row in "${rows[@]}"; do
		for size in "${sizes[@]}"; do
			for _ in $(seq "$repeat"); do
				for s in "${servers[@]}"; do
					bench "$s" "$pin" "$row" "$size"
				done
			done
		done
	done
	# New connections: CONNECT_CLIENTS clients, each dial, HELLO, answer,
	# close, again (CONNECT=0 leaves the row out).
	if [ "${CONNECT:-1}" != 0 ]; then
		for s in "${servers[@]}"; do
			mode=connect bench "$s" "$pin" "${CONNECT_CLIENTS:-16}/${CONNECT_CLIENTS:-16}" 18
		done
	fi
done
echo
echo "Echo comparison, $mode loop; $(date -u +%FT%TZ), $(nproc) cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$work/bin/echocompare" report "$results"
log "raw results and server logs in $work"
