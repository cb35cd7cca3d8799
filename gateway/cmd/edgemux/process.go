package main

import (
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/edgemux/edgemux/config"
)

// process holds the settings the binary owns rather than the gateway,
// because they belong to the process (tests run many gateways in one):
// the memory limit, the collector's GOGC and the logger. Start and every
// SIGHUP apply them.
type process struct {
	mem    memoryLimit
	gc     gcPercent
	level  slog.LevelVar
	format string // log.format at start: the handler is built once
}

// newProcess builds the logger from c and remembers the memory limit the
// process started with.
func newProcess(c config.Log, w io.Writer) (*process, *slog.Logger) {
	p := &process{mem: newMemoryLimit(), gc: newGCPercent(os.Getenv("GOGC")), format: c.Format}
	p.level.Set(parseLevel(c.Level))
	opts := &slog.HandlerOptions{Level: &p.level}
	if c.Format == "json" {
		return p, slog.New(slog.NewJSONHandler(w, opts))
	}
	return p, slog.New(slog.NewTextHandler(w, opts))
}

// apply sets the memory limit, GOGC and the log level from cfg. It returns
// the keys that need a restart: log.format, as the handler is built once.
func (p *process) apply(cfg config.Config, log *slog.Logger) (needRestart []string) {
	p.mem.apply(cfg.Limits.MemoryLimit, log)
	p.gc.apply(cfg.Limits.GCPercent, log)
	if lv := parseLevel(cfg.Log.Level); lv != p.level.Level() {
		p.level.Set(lv)
		log.Info("log level changed", "to", lv.String())
	}
	if cfg.Log.Format != p.format {
		return []string{"log.format"}
	}
	return nil
}

// parseLevel reads a validated log.level; anything else is info.
func parseLevel(s string) slog.Level {
	var lv slog.Level
	if lv.UnmarshalText([]byte(s)) != nil {
		return slog.LevelInfo
	}
	return lv
}

// memoryLimit applies limits.memory_limit to the Go runtime. Near the
// limit the runtime collects sooner and hands freed pages back to the OS
// at once; without one, what a burst left behind waits for the next
// collection, which a quiet process may not run for two minutes.
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

// gcPercent applies limits.gc_percent to the collector (its GOGC). A
// value in the config wins; 0 leaves the GOGC the environment set, and
// without one config.DefaultGCPercent applies (why 50: its doc).
type gcPercent struct {
	env     bool // GOGC was set in the environment
	initial int  // what the runtime started with: the environment's GOGC, or 100
}

func newGCPercent(env string) gcPercent {
	initial := debug.SetGCPercent(100) // the only way to read it; restored at once
	debug.SetGCPercent(initial)
	return gcPercent{env: env != "", initial: initial}
}

// apply sets the configured percentage, logging a change.
func (g gcPercent) apply(percent int, log *slog.Logger) {
	want := percent
	if want == 0 {
		want = config.DefaultGCPercent
		if g.env {
			want = g.initial
		}
	}
	if prev := debug.SetGCPercent(want); prev == want {
		return
	}
	log.Info("gc percent", "percent", want)
}
