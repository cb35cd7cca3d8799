#!/usr/bin/env bash
# udprecv.sh: the UDP receive path alone, datagrams per second on one core.
# Runs BenchmarkUDPRecv (gateway/udp_bench_test.go): the loops' recvmmsg
# (udpSocket.recv, the production function) in batches of 1, 8, 16 and 32
# on one and two SO_REUSEPORT sockets, against a plain ReadFromUDPAddrPort
# loop, the receiver pinned to one core and the load generator (a second
# process, sendmmsg from 16 source ports) to the other. Each round the
# generator fills the sockets' buffers and is stopped; the receiver's drain
# is timed. Prints the median of COUNT runs of each and its ratio to the
# ReadFrom loop on as many sockets, for wall time and for CPU time.
#
#   examples/bench/udprecv.sh
#   COUNT=5 N=2000000x BUFFER=262144 examples/bench/udprecv.sh
#
# Environment: COUNT (3), N (1000000x, datagrams per run), BUFFER
# (SO_RCVBUF asked for; default udp.read_buffer's 4 MiB), RECV_CPU (0),
# GEN_CPU (1).

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COUNT=${COUNT:-3}
N=${N:-1000000x}
BUFFER=${BUFFER:-}
RECV_CPU=${RECV_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/edgemux-udprecv.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cd "$ROOT"
go test -c -o "$WORK/gateway.test" ./gateway
(cd gateway && taskset -c "$RECV_CPU" env EDGEMUX_UDPGEN_CPU="$GEN_CPU" EDGEMUX_UDPBENCH_BUFFER="$BUFFER" \
	"$WORK/gateway.test" -test.run '^$' -test.bench 'BenchmarkUDPRecv' -test.benchtime "$N" -test.count "$COUNT") >"$WORK/out"
CPU=$(sed -n 's/^cpu: *//p' "$WORK/out" | head -1 | sed 's/ *$//')

echo "UDP receive path, one core (cpu $RECV_CPU; generator on cpu $GEN_CPU): $CPU; median of $COUNT runs of $N datagrams;" \
	"SO_RCVBUF ${BUFFER:-4194304 (default)}; $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
	/^BenchmarkUDPRecv\// {
		name = $1; sub(/^BenchmarkUDPRecv\//, "", name); sub(/-[0-9]+$/, "", name)
		for (i = 3; i <= NF; i++) {
			if ($i == "dgrams/s") wall[name] = wall[name] " " $(i - 1)
			if ($i == "dgrams/cpu-s") cpu[name] = cpu[name] " " $(i - 1)
		}
		if (!(name in seen)) { seen[name] = 1; order[n++] = name }
	}
	function median(list,   v, c, i, j, t) {
		c = split(list, v, " ")
		for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
		return (c % 2) ? v[(c + 1) / 2] + 0 : (v[c / 2] + v[c / 2 + 1]) / 2
	}
	END {
		printf "%-20s %14s %10s %16s %10s\n", "receiver", "dgrams/s", "x readfrom", "dgrams/cpu-s", "x readfrom"
		for (k = 0; k < n; k++) {
			name = order[k]; split(name, part, "/")
			base = "readfrom/" part[2]
			printf "%-20s %14.0f %10.2f %16.0f %10.2f\n", name, median(wall[name]), median(wall[name]) / median(wall[base]),
				median(cpu[name]), median(cpu[name]) / median(cpu[base])
		}
	}' "$WORK/out"
