#!/usr/bin/env bash
# run.sh: one publisher's fan-out to SUBS subscribers, edgemux's private
# protocol against mosquitto (MQTT 3.1.1, QoS 0), driven by the same
# client loop (fanout, this module). For each server: start it as its own
# process on a free loopback port with a config of this script's own, run
# fanout against it, and read the server's peak RSS (VmHWM: in the fan-out,
# and in its whole life), RSS and CPU from /proc. Prints one table; raw
# lines stay in the work folder it names.
#
#   examples/bench/fanoutcompare/run.sh                  # edgemux and mosquitto
#   SERVERS=edgemux SUBS=200 DURATION=3s ./run.sh        # smaller
#
# Environment: SERVERS ("edgemux mosquitto"), SUBS (1000), DURATION (10s),
# SIZE (32), RATE (0 = as fast as the publisher's socket takes them),
# MOSQUITTO (/usr/sbin/mosquitto; Debian's package), MEMORY_LIMIT (edgemux's
# limits.memory_limit in bytes; 0, its default, is none), WSS_WINDOW (3:
# seconds of the fan-out in which the pages each server touches are
# counted; keep it under DURATION minus a second).

set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
SERVERS=${SERVERS:-edgemux mosquitto}
SUBS=${SUBS:-1000}
DURATION=${DURATION:-10s}
SIZE=${SIZE:-32}
RATE=${RATE:-0}
MOSQUITTO=${MOSQUITTO:-/usr/sbin/mosquitto}
MEMORY_LIMIT=${MEMORY_LIMIT:-0}
WSS_WINDOW=${WSS_WINDOW:-3}
work=$(mktemp -d /tmp/fanoutcompare.XXXXXX)
pids=()

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 143' TERM INT

log() { echo "== $*" >&2; }

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_port() {
	local i
	for ((i = 0; i < 150; i++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.2
	done
	return 1
}

status_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
syscw() { awk '$1 == "syscw:" { print $2 }' "/proc/$1/io"; }
# sample_rss PID FILE: append "VmRSS RssAnon RssFile" (KiB) to FILE every
# 20 ms while PID lives; the kernel keeps a peak of VmRSS (VmHWM) but not
# of its parts, so the split of the peak is the largest sample's.
sample_rss() {
	while [ -r "/proc/$1/status" ]; do
		awk '$1 == "VmRSS:" { r = $2 } $1 == "RssAnon:" { a = $2 } $1 == "RssFile:" { f = $2 }
			END { if (r != "") print r, a, f }' "/proc/$1/status" >>"$2" 2>/dev/null || return 0
		sleep 0.02
	done
}
# working_set PID OUT FILE: once fanout (writing OUT) says its subscribers
# are up, wait a second, clear the server's referenced bits
# (/proc/PID/clear_refs), and WSS_WINDOW seconds later write to FILE
# "anon file": the KiB of its pages, anonymous and file-backed, that it
# touched in between (/proc/PID/smaps, Referenced). RSS counts every page
# mapped, and the kernel maps a cached file's pages 64 KiB at a time
# around each one touched (fault-around); this is what the server used.
working_set() {
	local i
	for ((i = 0; i < 600; i++)); do
		grep -q '^up ' "$2" 2>/dev/null && break
		sleep 0.1
	done
	sleep 1
	echo 1 >"/proc/$1/clear_refs" || return 0
	sleep "$WSS_WINDOW"
	awk '/^[0-9a-f]+-[0-9a-f]+ / { file = ($5 != 0) }
		$1 == "Referenced:" { if (file) f += $2; else a += $2 }
		END { print a + 0, f + 0 }' "/proc/$1/smaps" >"$3" 2>/dev/null || true
}
# peak_split FILE: "anon file" of the largest VmRSS sample in FILE.
peak_split() { sort -n -k1,1 "$1" | tail -1 | awk '{ print $2, $3 }'; }
cpu_seconds() { awk -v tck="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "%.2f\n", ($12 + $13) / tck }' "/proc/$1/stat"; }

log "building into $work"
(cd "$here" && go build -o "$work/fanout" .)
# edgemux as `make release` builds it: static (CGO_ENABLED=0), so no libc
# and loader are mapped, 1.4 MiB of RssFile a dynamic build adds.
(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$work/edgemux" ./gateway/cmd/edgemux)

# start NAME PORT: start the server, print its pid.
start() {
	case $1 in
	edgemux)
		cat >"$work/edgemux.yaml" <<YAML
listen: 127.0.0.1:$2
limits:
  max_conns: 4096
  max_conns_per_ip: 4096
  max_sniffing: 4096
  max_sniffing_per_ip: 4096
  memory_limit: $MEMORY_LIMIT
private:
  hello_within: 60s
udp:
  enabled: false
log:
  level: warn
YAML
		"$work/edgemux" run -c "$work/edgemux.yaml" >"$work/edgemux.log" 2>&1 &
		echo $! ;;
	mosquitto)
		cat >"$work/mosquitto.conf" <<CONF
listener $2 127.0.0.1
allow_anonymous true
persistence false
log_dest stdout
max_connections -1
CONF
		"$MOSQUITTO" -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
		echo $! ;;
	*) log "unknown server $1"; return 1 ;;
	esac
}

declare -A row
for name in $SERVERS; do
	port=$(free_port)
	pid=$(start "$name" "$port")
	pids+=("$pid")
	if ! wait_port "$port"; then
		log "$name did not listen on $port (see $work/$name.log)"; continue
	fi
	proto=private
	[ "$name" = mosquitto ] && proto=mqtt
	# A second for the server to settle once it listens (edgemux unmaps
	# the executable pages its start-up left mapped), then reset its peak
	# RSS to the current RSS (clear_refs 5): fan_peak_kib is the peak of
	# the fan-out alone, peak_rss_kib that of the whole life, start-up
	# included.
	sleep 1
	start_peak=$(status_kib "$pid" VmHWM)
	echo 5 >"/proc/$pid/clear_refs" || true
	base=$(status_kib "$pid" VmRSS)
	base_anon=$(status_kib "$pid" RssAnon)
	base_file=$(status_kib "$pid" RssFile)
	sample_rss "$pid" "$work/$name.rss" &
	sampler=$!
	cpu0=$(cpu_seconds "$pid")
	w0=$(syscw "$pid")
	log "$name (pid $pid, port $port): $SUBS subscribers, $DURATION of publishing"
	working_set "$pid" "$work/$name.out" "$work/$name.wss" &
	wss=$!
	if ! "$work/fanout" -proto "$proto" -addr "127.0.0.1:$port" -subs "$SUBS" -duration "$DURATION" \
		-size "$SIZE" -rate "$RATE" >"$work/$name.out" 2>&1; then
		log "$name: fanout failed: $(tail -1 "$work/$name.out")"
	fi
	result=$(grep '^result' "$work/$name.out" || true)
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	wait "$wss" 2>/dev/null || true
	read -r peak_anon peak_file < <(peak_split "$work/$name.rss")
	ws_anon=- ws_file=- ws_total=-
	if [ -s "$work/$name.wss" ]; then
		read -r ws_anon ws_file <"$work/$name.wss"
		ws_total=$((ws_anon + ws_file))
	fi
	fan_peak=$(status_kib "$pid" VmHWM)
	row[$name]="$result fan_peak_kib=$fan_peak peak_rss_kib=$((fan_peak > start_peak ? fan_peak : start_peak)) peak_anon_kib=$peak_anon peak_file_kib=$peak_file ws_anon_kib=$ws_anon ws_file_kib=$ws_file ws_kib=$ws_total rss_kib=$(status_kib "$pid" VmRSS) base_rss_kib=$base base_anon_kib=$base_anon base_file_kib=$base_file cpu_s=$(echo "$(cpu_seconds "$pid") - $cpu0" | bc) write_calls=$(($(syscw "$pid") - w0))"
	echo "$name ${row[$name]}" >>"$work/results.txt"
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
done

field() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }
echo
echo "Fan-out, 1 publisher to $SUBS subscribers, ${SIZE}-byte payloads, $DURATION; $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %-28s' ""; for name in $SERVERS; do printf '%14s' "$name"; done; echo
for k in fan_peak_kib peak_rss_kib peak_anon_kib peak_file_kib ws_kib ws_anon_kib ws_file_kib base_rss_kib base_anon_kib base_file_kib rss_kib deliv_per_s pub_per_s delivered delivered_after_drain offered cpu_s write_calls; do
	printf '  %-28s' "$k"
	for name in $SERVERS; do printf '%14s' "$(field "${row[$name]:-}" "$k")"; done
	echo
done
# ratio K: edgemux's K over mosquitto's, when both ran, rounded to two
# decimals (bc's scale truncates: 1.4366 printed as 1.43).
ratio() {
	local a b
	a=$(field "${row[edgemux]:-}" "$1"); b=$(field "${row[mosquitto]:-}" "$1")
	[ -n "$a" ] && [ -n "$b" ] && [ "$b" != 0 ] && awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }' || echo -
}
if [ -n "${row[edgemux]:-}" ] && [ -n "${row[mosquitto]:-}" ]; then
	echo "  edgemux/mosquitto: peak RSS in the fan-out $(ratio fan_peak_kib)x, in the whole life $(ratio peak_rss_kib)x (RssAnon $(ratio peak_anon_kib)x, RssFile $(ratio peak_file_kib)x), pages used in the fan-out $(ratio ws_kib)x, deliveries/s $(ratio deliv_per_s)x"
fi
echo "== raw results in $work/results.txt"
