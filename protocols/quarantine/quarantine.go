// Package quarantine is the small isolated pool that takes what is unknown
// or misbehaves: unclassified bytes, over-budget or silent connections,
// connections a route sends here, and the records of connections other
// workers closed for malformed input or a panic.
//
// A Book is the shared record. It counts landings per reason, keeps a hex
// sample of the last few in a ring for the dashboard, rate-limits its own
// logging, and bans source addresses that keep landing here. Banned is
// called by the epoll loops at accept time, so its common case (no bans at
// all) is a single atomic load.
//
// A Handler is the quarantine pool's protocols.Handler: each session holds
// its connection, samples the first bytes, drains the rest, closes and
// records exactly once. Nothing here can fail in a way that reaches another
// connection: every size is bounded and bad input is only ever counted.
package quarantine

import (
	"errors"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
)

// ErrQuarantined is the reason a quarantine session gives when it closes
// its connection.
var ErrQuarantined = errors.New("quarantine: connection quarantined")

// ReasonOther is the Stats key under which landings with a reason this
// package does not know (including protocols.ReasonNone) are counted.
const ReasonOther protocols.Reason = "other"

// Defaults for the `quarantine:` config section; Normalize applies them to
// zero (or negative) fields.
const (
	DefaultSampleBytes = 64
	DefaultHold        = 2 * time.Second
	DefaultLogRate     = 20
	DefaultBanAfter    = 20
	DefaultBanWindow   = time.Minute
	DefaultBanFor      = 5 * time.Minute
	DefaultMaxTracked  = 10000
)

// Upper bounds Normalize clamps to, so a config typo cannot make the book
// allocate without limit.
const (
	MaxSampleBytes = 4096
	MaxLogRate     = 10000
	MaxBanAfter    = 1 << 30
	MaxTracked     = 1 << 20
	// MaxDuration bounds hold, ban_window and ban_for, which keeps ban
	// end times far from int64 overflow.
	MaxDuration = 365 * 24 * time.Hour
)

// SamplesKept is how many of the latest samples the book's ring holds.
const SamplesKept = 32

// Normalize returns cfg with defaults filled in for zero or negative fields
// and sizes clamped to this package's upper bounds. The gateway should use
// its Hold as the quarantine pool's idle timeout.
func Normalize(cfg config.Quarantine) config.Quarantine {
	cfg.SampleBytes = clampInt(cfg.SampleBytes, DefaultSampleBytes, MaxSampleBytes)
	cfg.LogRate = clampInt(cfg.LogRate, DefaultLogRate, MaxLogRate)
	cfg.BanAfter = clampInt(cfg.BanAfter, DefaultBanAfter, MaxBanAfter)
	cfg.MaxTracked = clampInt(cfg.MaxTracked, DefaultMaxTracked, MaxTracked)
	cfg.Hold = clampDuration(cfg.Hold, DefaultHold)
	cfg.BanWindow = clampDuration(cfg.BanWindow, DefaultBanWindow)
	cfg.BanFor = clampDuration(cfg.BanFor, DefaultBanFor)
	return cfg
}

func clampInt(v, def, limit int) int {
	if v <= 0 {
		return def
	}
	return min(v, limit)
}

func clampDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return min(d, MaxDuration)
}

// reasonSlots lists the reasons counted in their own slot; index
// len(reasonSlots) is ReasonOther.
var reasonSlots = [...]protocols.Reason{
	protocols.ReasonTimeout,
	protocols.ReasonNoMatch,
	protocols.ReasonOversize,
	protocols.ReasonMalformed,
	protocols.ReasonPanic,
	protocols.ReasonRouted,
}

const numReasonSlots = len(reasonSlots) + 1

// reasonIndex maps a reason to its counter slot without a map lookup, so
// counting stays cheap on the malformed/panic path of every worker.
func reasonIndex(r protocols.Reason) int {
	for i, known := range reasonSlots {
		if r == known {
			return i
		}
	}
	return len(reasonSlots)
}

func reasonAt(i int) protocols.Reason {
	if i < len(reasonSlots) {
		return reasonSlots[i]
	}
	return ReasonOther
}
