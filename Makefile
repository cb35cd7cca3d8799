# edgemux: `make test` installs what the tests need when it is missing and
# runs the whole suite with the race detector; `make run` starts a gateway
# with the embedded default config on 127.0.0.1:5020.
GO ?= go

.PHONY: test deps vet allocs race run build bench fuzz

test: deps vet allocs race

deps:
	@bash .ci/deps

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# The allocation assertions once more without the race detector: under it
# sync.Pool drops items at random, so those that depend on a pool skip.
allocs:
	$(GO) test -count=1 -run 'Alloc|DoNotAllocate' ./...

# The WebSocket comparison is a module of its own (nbio stays out of ours);
# it goes first so the main suite's summary is what the run ends with. It
# runs without -race: nbio v1.6.8 itself races (nbhttp's listener goroutine
# writes a conn's address that its poller reads), which is not ours to fix.
race:
	cd examples/bench/wscompare && $(GO) vet ./... && $(GO) test -timeout 10m ./...
	$(GO) test -race -timeout 30m ./...

build:
	$(GO) build -o bin/edgemux ./gateway/cmd/edgemux

run:
	$(GO) run ./gateway/cmd/edgemux

bench:
	bash examples/bench/stages.sh

# Short fuzzing pass over every fuzz target (FUZZTIME per target).
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
