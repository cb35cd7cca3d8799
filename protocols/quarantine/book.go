package quarantine

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
)

// Book is the shared quarantine record. It is safe for concurrent use: the
// quarantine pool's sessions, every other worker (for malformed and panic
// records) and the epoll loops (Banned, at accept) all use one Book.
//
// A nil *Book records nothing and bans nobody, so a gateway wired without
// one degrades to "no quarantine bookkeeping" rather than a crash.
type Book struct {
	cfg   config.Quarantine
	log   *slog.Logger
	now   func() time.Time
	epoch time.Time // times inside the book are nanoseconds since this

	counts  [numReasonSlots]atomic.Uint64
	refused atomic.Uint64
	// anyBans is true while the ban list may be non-empty; it lets Banned
	// answer the common case with one atomic load and no lock.
	anyBans atomic.Bool

	mu        sync.RWMutex // guards landings, bans, bansTotal
	landings  *addrList    // sources with landings in their current window
	bans      *addrList    // banned sources, in expiry order
	bansTotal uint64

	sampleMu   sync.Mutex // guards ring, bucket, suppressed
	ring       *sampleRing
	bucket     logBucket
	suppressed uint64
}

// Stats is a snapshot of the book's counters.
type Stats struct {
	// Reasons counts landings per reason; every known reason is present,
	// unknown ones are summed under ReasonOther.
	Reasons        map[protocols.Reason]uint64
	Landings       uint64 // all landings, the sum of Reasons
	BansActive     int    // sources banned right now
	BansTotal      uint64 // bans ever started
	Tracked        int    // sources with landings counted toward a ban
	LogsSuppressed uint64 // log lines dropped by the rate limit
	Refused        uint64 // connections refused at accept while banned
}

// NewBook returns an empty book. cfg is normalized (see Normalize); a nil
// log discards, a nil now means time.Now (tests inject a clock).
func NewBook(cfg config.Quarantine, log *slog.Logger, now func() time.Time) *Book {
	cfg = Normalize(cfg)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Book{
		cfg:      cfg,
		log:      log.With(slog.String("component", "quarantine")),
		now:      now,
		epoch:    now(),
		landings: newAddrList(cfg.MaxTracked),
		bans:     newAddrList(cfg.MaxTracked),
		ring:     newSampleRing(SamplesKept, cfg.SampleBytes),
		bucket:   newLogBucket(cfg.LogRate),
	}
}

// Record notes one connection that landed in quarantine: it counts the
// reason, keeps a sample of at most SampleBytes of sample (copied; the
// caller may reuse it), logs within the rate limit, and counts the landing
// toward a ban of the peer's address.
func (b *Book) Record(peer netip.AddrPort, reason protocols.Reason, sample []byte) {
	if b == nil {
		return
	}
	b.counts[reasonIndex(reason)].Add(1)
	at := b.now()
	t := b.since(at)
	// A connection that timed out without sending a byte is recorded but
	// does not count towards a ban: browsers' speculative preconnects and
	// TCP health checks look exactly like that and are not attacks.
	banned := false
	if reason != protocols.ReasonTimeout || len(sample) > 0 {
		banned = b.land(peer.Addr().Unmap(), t)
	}

	b.sampleMu.Lock()
	b.ring.put(peer, reason, at, sample)
	b.sampleMu.Unlock()

	b.logLanding(peer, reason, sample, t)
	if banned {
		b.logBan(peer.Addr().Unmap(), t)
	}
}

// Banned reports whether ip is banned now. With no bans in force it is a
// single atomic load; otherwise a read-locked map lookup.
func (b *Book) Banned(ip netip.Addr) bool {
	if b == nil || !b.anyBans.Load() {
		return false
	}
	return b.bannedLocked(ip)
}

// bannedLocked is Banned's slow path, kept out of line so that Banned
// inlines into the accept loop.
func (b *Book) bannedLocked(ip netip.Addr) bool {
	ip = ip.Unmap()
	b.mu.RLock()
	var until int64
	s, ok := b.bans.get(ip)
	if ok {
		until = s.at
	}
	b.mu.RUnlock()
	return ok && b.since(b.now()) < until
}

// CountRefused counts one connection refused at accept because its source
// is banned.
func (b *Book) CountRefused() {
	if b == nil {
		return
	}
	b.refused.Add(1)
}

// Stats returns a snapshot of the counters. It also drops expired bans and
// landing windows, so a quiet book still sheds its state when the
// dashboard or metrics look at it.
func (b *Book) Stats() Stats {
	if b == nil {
		return Stats{Reasons: map[protocols.Reason]uint64{}}
	}
	st := Stats{Reasons: make(map[protocols.Reason]uint64, numReasonSlots)}
	for i := range b.counts {
		n := b.counts[i].Load()
		st.Reasons[reasonAt(i)] = n
		st.Landings += n
	}
	st.Refused = b.refused.Load()

	b.mu.Lock()
	b.expire(b.since(b.now()))
	st.BansActive, st.BansTotal, st.Tracked = b.bans.len(), b.bansTotal, b.landings.len()
	b.mu.Unlock()

	b.sampleMu.Lock()
	st.LogsSuppressed = b.suppressed
	b.sampleMu.Unlock()
	return st
}

// Samples appends the latest samples (at most SamplesKept) to dst, newest
// first, and returns the extended slice.
func (b *Book) Samples(dst []Sample) []Sample {
	if b == nil {
		return dst
	}
	b.sampleMu.Lock()
	defer b.sampleMu.Unlock()
	return b.ring.appendNewest(dst)
}

func (b *Book) since(at time.Time) int64 { return int64(at.Sub(b.epoch)) }

// land counts one landing of ip at t and reports whether it started a ban.
// Landings are counted in a window that opens at a source's first landing
// and lasts BanWindow; BanAfter landings inside it ban the source for
// BanFor. A source already banned is not tracked again until the ban ends.
func (b *Book) land(ip netip.Addr, t int64) (banned bool) {
	if !ip.IsValid() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(t)
	if ban, ok := b.bans.get(ip); ok {
		if t < ban.at {
			return false
		}
		b.bans.remove(ip) // ended, though not yet at the front
	}
	src, ok := b.landings.get(ip)
	if ok && t-src.at >= int64(b.cfg.BanWindow) {
		// The window ended. Lists are in time order only as far as
		// concurrent callers' clock readings are, so check rather than
		// trust expire to have dropped it.
		b.landings.remove(ip)
		ok = false
	}
	if !ok {
		// Full of live windows: forget the oldest. An attacker with many
		// addresses can thus dilute tracking, but memory stays bounded.
		src = b.landings.push(ip, t)
	}
	src.count++
	if int(src.count) < b.cfg.BanAfter {
		return false
	}
	b.landings.remove(ip)
	b.bans.push(ip, t+int64(b.cfg.BanFor))
	b.bansTotal++
	b.anyBans.Store(true)
	return true
}

// expire drops landing windows and bans that ended at or before t. Both
// lists are in time order, so this stops at the first live entry.
func (b *Book) expire(t int64) {
	b.landings.dropUpTo(t - int64(b.cfg.BanWindow))
	b.bans.dropUpTo(t)
	if b.bans.len() == 0 {
		b.anyBans.Store(false)
	}
}

// allowLog takes a token for one line at level, counting it as suppressed
// when the bucket is empty. Lines the logger would drop anyway take none.
func (b *Book) allowLog(level slog.Level, t int64) (ok bool, suppressedBefore uint64) {
	if !b.log.Enabled(context.Background(), level) {
		return false, 0
	}
	b.sampleMu.Lock()
	defer b.sampleMu.Unlock()
	ok, suppressedBefore = b.bucket.take(t)
	if !ok {
		b.suppressed++
	}
	return ok, suppressedBefore
}

func (b *Book) logLanding(peer netip.AddrPort, reason protocols.Reason, sample []byte, t int64) {
	ok, suppressed := b.allowLog(slog.LevelInfo, t)
	if !ok {
		return
	}
	kept := sample[:min(len(sample), b.cfg.SampleBytes)]
	b.log.LogAttrs(context.Background(), slog.LevelInfo, "quarantined",
		slog.String("peer", peerString(peer)),
		slog.String("reason", string(reason)),
		slog.Int("bytes", len(sample)),
		slog.String("sample", hex.EncodeToString(kept)),
		slog.Uint64("suppressed", suppressed))
}

func (b *Book) logBan(ip netip.Addr, t int64) {
	ok, suppressed := b.allowLog(slog.LevelWarn, t)
	if !ok {
		return
	}
	b.log.LogAttrs(context.Background(), slog.LevelWarn, "source banned",
		slog.String("ip", ip.String()),
		slog.Int("landings", b.cfg.BanAfter),
		slog.Duration("window", b.cfg.BanWindow),
		slog.Duration("for", b.cfg.BanFor),
		slog.Uint64("suppressed", suppressed))
}
