# edgemux: `make test` installs what the tests need when it is missing and
# runs the whole suite with the race detector; `make run` starts a gateway
# with the embedded default config on 127.0.0.1:5020.
GO ?= go

.PHONY: test deps vet cross arm allocs norace race run build bench udpcompare mbcompare echocompare fuzz fuzz-brief release

# race goes last so that the main suite's summary is what the run ends with.
test: deps vet cross arm allocs norace fuzz-brief race

deps:
	@bash .ci/deps

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# The allocation assertions once more without the race detector: under it
# sync.Pool drops items at random, so those that depend on a pool skip.
allocs:
	$(GO) test -count=1 -run 'Alloc|DoNotAllocate' ./...

# The gateway's tests once more without the race detector: race builds
# read and write connections with unix.Read/Write (the detector cannot see
# raw system calls), so only this run covers the raw calls production uses
# (gateway/sysio_linux.go); and race builds keep every table on the Go heap,
# so only this run covers the tables mapped outside it (registry/offheap).
norace:
	$(GO) test -count=1 -timeout 20m ./gateway/... ./registry/...

# The WebSocket comparison is a module of its own (nbio stays out of ours);
# it goes first so the main suite's summary is what the run ends with. It
# runs without -race: nbio v1.6.8 itself races (nbhttp's listener goroutine
# writes a conn's address that its poller reads), which is not ours to fix.
#
# The UDP comparison (rudp, kcp-go, quic-go) is a module of its own too,
# so kcp-go and quic-go stay out of ours; its test runs under -race.
# The Modbus comparison (mbcompare) is one too, like the others; its tests
# check that the benchmark's gateway decodes the simulator's values.
#
# The echo comparison (Go net, gnet, nbio) is one too; like wscompare its
# smoke test runs without -race, nbio being in it.
race:
	cd examples/bench/wscompare && $(GO) vet ./... && $(GO) test -timeout 10m ./...
	cd examples/bench/udpcompare && $(GO) vet ./... && $(GO) test -race -timeout 10m ./...
	cd examples/bench/mbcompare && $(GO) vet ./... && $(GO) test -race -timeout 10m ./...
	cd examples/bench/echocompare && $(GO) vet ./... && $(GO) test -timeout 10m ./...
	cd examples/bench/coapcompare && $(GO) vet ./...
	cd examples/bench/fanoutcompare && $(GO) vet ./...
	$(GO) test -race -timeout 30m ./...

# bin/edgemux is stamped like a release (without -s -w), so `version` names
# the revision even where the toolchain records none (GOFLAGS=-buildvcs=false).
build:
	$(GO) build -ldflags "$(STAMP_LDFLAGS)" -o bin/edgemux ./gateway/cmd/edgemux

# The module builds for the boxes it runs on: x86-64 servers, 64-bit ARM,
# 32-bit ARMv7 (GOARM=7) appliances, and RISC-V. On 32-bit ARM the tests
# must compile too (go vet type-checks them): an int is 32 bits there, so a
# constant like 1 << 40 that fits on the others does not. Cold, each target
# compiles the standard library and the dependencies once (about a minute of
# CPU); after that the build cache makes it seconds.
CROSS_ARCHES ?= amd64 arm64 arm riscv64
cross:
	@set -e; for arch in $(CROSS_ARCHES); do \
	  echo "cross: linux/$$arch"; \
	  GOOS=linux GOARCH=$$arch GOARM=7 $(GO) build ./...; \
	done
	GOOS=linux GOARCH=arm GOARM=7 $(GO) vet ./...

# The pure packages' unit tests once more as 32-bit ARMv7 binaries under
# qemu-user: 32-bit targets align struct fields differently (a slice
# header is 12 bytes, a uint64 field only 4-aligned unless it is an
# atomic.Uint64), and Go's 64-bit atomics panic on a word that is not
# 8-aligned there (sync/atomic, "Bugs"). -short: emulation is some 20x
# slower, and the long loads (rudp's minute of telemetry) add nothing here.
ARM_PKGS = ./registry/... ./route/... ./sniff ./config ./protocols ./protocols/private ./protocols/modbus ./protocols/websocket ./protocols/quarantine ./protocols/modbus/wire ./protocols/modbus/poll ./protocols/coap ./protocols/rudp/...
arm:
	GOOS=linux GOARCH=arm GOARM=7 $(GO) test -short -count=1 -exec qemu-arm $(ARM_PKGS)

run:
	$(GO) run ./gateway/cmd/edgemux

# Release binaries for the boxes edgemux runs on: static (CGO_ENABLED=0,
# no libc to match on the appliance) for linux/amd64, arm64 and arm
# (GOARM=7), stamped with the version, VCS revision and build time that
# `edgemux version` prints, into $(DIST) with their SHA-256 sums. VERSION
# is the nearest tag (git describe), or the short revision without one;
# each of the three can be set on the command line.
DIST ?= dist
RELEASE_ARCHES ?= amd64 arm64 arm
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo +dirty)
BUILD_TIME ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
STAMP_LDFLAGS = -X main.version=$(VERSION) -X main.revision=$(REVISION) -X main.buildTime=$(BUILD_TIME)
RELEASE_LDFLAGS = -s -w $(STAMP_LDFLAGS)
release:
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for arch in $(RELEASE_ARCHES); do \
	  echo "release: linux/$$arch"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch GOARM=7 $(GO) build -trimpath -buildvcs=false \
	    -ldflags "$(RELEASE_LDFLAGS)" -o $(DIST)/edgemux-linux-$$arch ./gateway/cmd/edgemux; \
	done
	cd $(DIST) && sha256sum edgemux-linux-* > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

bench:
	bash examples/bench/stages.sh

# edgemux vs. Go net, gnet v2 and nbio as the same echo server, every row
# in one run (about 10 minutes): ECHOCOMPARE_SERVERS picks servers, and the
# script's environment (ROWS, SIZES, PINS, MODE, DURATION) the rows, e.g.
# ROWS=1000/1000 SIZES=64 PINS=pinned make echocompare.
echocompare:
	bash examples/bench/echocompare/run.sh $(ECHOCOMPARE_SERVERS)

# rudp side by side with kcp-go (fast and default) and quic-go, one run of
# every row (about 8 minutes); UDPCOMPARE_FLAGS passes flags, e.g.
# UDPCOMPARE_FLAGS='-rows echo -echo-for 10s'.
udpcompare:
	cd examples/bench/udpcompare && $(GO) run . $(UDPCOMPARE_FLAGS)

# Modbus: edgemux's poller vs. a plain goburrow loop on 500 simulated
# devices x 30 tags, and its server vs. a plain Go server under 100
# masters (about 2 minutes); MBCOMPARE_FLAGS passes flags, e.g.
# MBCOMPARE_FLAGS='-rows poll -intervals 10ms -duration 30s'.
mbcompare:
	cd examples/bench/mbcompare && $(GO) run . $(MBCOMPARE_FLAGS)

# Fuzzing pass over every fuzz target, FUZZTIME each; every failing target
# is reported (its input lands in the package's testdata/fuzz/), then the
# run fails. fuzz-brief is the short pass of `make test`, so a new finding
# fails a build.
FUZZTIME ?= 10s
fuzz:
	GO=$(GO) bash .ci/fuzz $(FUZZTIME)

FUZZTIME_BRIEF ?= 3s
fuzz-brief:
	GO=$(GO) bash .ci/fuzz $(FUZZTIME_BRIEF)
