package main

import (
	"log/slog"
	"math"
	"runtime/debug"
)

// memoryLimit applies limits.memory_limit to the Go runtime. The limit
// belongs to the process, so the binary sets it, not the gateway package
// (tests run many gateways in one process). Near the limit the runtime
// collects sooner and hands freed pages back to the OS at once; without
// one, what a burst left behind waits for the next collection, which a
// quiet process may not run for two minutes.
type memoryLimit struct {
	initial int64 // what the process started with: GOMEMLIMIT, or none
}

func newMemoryLimit() memoryLimit {
	return memoryLimit{initial: debug.SetMemoryLimit(-1)}
}

// apply sets the configured limit; 0 restores the initial one.
func (m memoryLimit) apply(bytes int, log *slog.Logger) {
	limit := m.initial
	if bytes > 0 {
		limit = int64(bytes)
	}
	if prev := debug.SetMemoryLimit(limit); prev == limit {
		return
	}
	if limit == math.MaxInt64 {
		log.Info("memory limit", "bytes", "none")
		return
	}
	log.Info("memory limit", "bytes", limit)
}
