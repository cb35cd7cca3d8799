#!/bin/sh
# Runs northcompare with natscli's `nats bench pub` beside the ceilings.
# natscli is installed into a temp GOBIN (not into the module, not into
# ~/go/bin), once per machine: /tmp/northcompare-gobin. It runs 100,000
# messages a row, a million a core NATS row (at 100,000 those last under
# 100 ms, too short to be read on a shared machine), and three rounds of
# the comparison with nats bench; arguments go to northcompare after these
# and override them (e.g. -nats-n 100000 -rounds 1 -outage 10s for a
# smoke run).
#
#	examples/bench/northcompare/run.sh [-n 100000] [-nats-n 1000000] [-rounds 3] [-outage 60s]
set -eu
cd "$(dirname "$0")/../../.."
NATSCLI_VERSION=${NATSCLI_VERSION:-v0.5.1} # builds with Go 1.26
GOBIN=${NORTHCOMPARE_GOBIN:-/tmp/northcompare-gobin}
if [ ! -x "$GOBIN/nats" ] || ! "$GOBIN/nats" --version 2>&1 | grep -q "${NATSCLI_VERSION#v}"; then
	mkdir -p "$GOBIN"
	# Outside the module: go install pkg@version ignores go.mod here.
	(cd /tmp && GOBIN="$GOBIN" GOFLAGS=-mod=mod go install "github.com/nats-io/natscli/nats@$NATSCLI_VERSION")
fi
exec go run ./examples/bench/northcompare -natscli "$GOBIN/nats" -n 100000 -nats-n 1000000 -rounds 3 "$@"
