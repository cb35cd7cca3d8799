#!/bin/bash
# idleperf.sh: the rudp idle row with the server's system calls, context
# switches and (optionally) a perf profile taken inside its idle window.
#
#   ./idleperf.sh OUT [udpcompare flags...]
#   ./idleperf.sh /tmp/idle-25s -rudp-keepalive 25s -rudp-idle-timeout 75s
#   PROFILE=1 ./idleperf.sh /tmp/idle-10s
#   BIN=/tmp/udpcompare-old ./idleperf.sh /tmp/idle-25s-old -rudp-keepalive 25s ...
#
# BIN runs a udpcompare binary built beforehand (an old commit's, for a
# like-for-like pair; built outside a measurement's CPU lock) instead of
# building this directory's.
#
# Writes OUT.txt (the row), OUT.stat.txt (perf stat of the server over
# 20 s of the idle window) and, with PROFILE=1, OUT.perf.data (perf record
# -g over the next 20 s: perf report -i OUT.perf.data --children). perf
# adds a little to the row's idle CPU (PROFILE more): compare runs taken
# the same way. Needs perf and kernel.perf_event_paranoid <= 1 (or root).
# The window is found by time: the row spends about 20 s on the empty
# server, 8-15 s opening 100,000 sessions and 30 s settling before its
# 60 s idle window, so the counting starts 70 s in.
set -eu
out=$1
shift
dir=$(cd "$(dirname "$0")" && pwd)
if [ -n "${BIN:-}" ]; then
	bin=$BIN
else
	bin=$(mktemp /tmp/udpcompare-idleperf.XXXXXX)
	trap 'rm -f "$bin"' EXIT
	(cd "$dir" && go build -o "$bin" .)
fi
"$bin" -stacks rudp -rows idle "$@" >"$out.txt" 2>&1 &
main=$!
child=
for _ in $(seq 1 100); do
	child=$(pgrep -P "$main" | head -1 || true)
	[ -n "$child" ] && break
	sleep 0.2
done
[ -n "$child" ] || { echo "idleperf: no server process" >&2; exit 1; }
sleep 70
perf stat -e task-clock,context-switches,cpu-migrations \
	-e syscalls:sys_enter_recvmmsg,syscalls:sys_enter_sendmmsg \
	-e syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep \
	-p "$child" -- sleep 20 >"$out.stat.txt" 2>&1
if [ "${PROFILE:-0}" = 1 ]; then
	perf record -g -F 999 -o "$out.perf.data" -p "$child" -- sleep 20 >/dev/null 2>&1
fi
wait "$main"
echo "load at the end: $(cat /proc/loadavg)" >>"$out.txt"
cat "$out.txt" "$out.stat.txt"
