package quarantine

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
)

// fakeClock is an injectable clock that only moves when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logBuffer is a goroutine-safe buffer for a slog text handler.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) lines(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range strings.Lines(l.buf.String()) {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

func newTestBook(t testing.TB, cfg config.Quarantine) (*Book, *fakeClock, *logBuffer) {
	t.Helper()
	clk := newFakeClock()
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return NewBook(cfg, log, clk.now), clk, logs
}

func peerN(i int) netip.AddrPort {
	ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	return netip.AddrPortFrom(ip, uint16(1000+i%50000))
}

func TestNormalize(t *testing.T) {
	defaults := config.Quarantine{
		SampleBytes: 64, Hold: 2 * time.Second, LogRate: 20, BanAfter: 20,
		BanWindow: time.Minute, BanFor: 5 * time.Minute, MaxTracked: 10000,
	}
	tests := []struct {
		name string
		in   config.Quarantine
		want config.Quarantine
	}{
		{"zero gets defaults", config.Quarantine{}, defaults},
		{"negatives get defaults", config.Quarantine{
			SampleBytes: -1, Hold: -1, LogRate: -1, BanAfter: -1,
			BanWindow: -1, BanFor: -1, MaxTracked: -1,
		}, defaults},
		{"set values kept", config.Quarantine{
			SampleBytes: 16, Hold: time.Second, LogRate: 5, BanAfter: 3,
			BanWindow: time.Second, BanFor: time.Hour, MaxTracked: 7,
		}, config.Quarantine{
			SampleBytes: 16, Hold: time.Second, LogRate: 5, BanAfter: 3,
			BanWindow: time.Second, BanFor: time.Hour, MaxTracked: 7,
		}},
		{"huge values clamped", config.Quarantine{
			SampleBytes: 1 << 30, LogRate: 1 << 30, MaxTracked: 1 << 30, BanAfter: math.MaxInt,
			Hold: math.MaxInt64, BanWindow: math.MaxInt64, BanFor: math.MaxInt64,
		}, config.Quarantine{
			SampleBytes: MaxSampleBytes, Hold: MaxDuration, LogRate: MaxLogRate, BanAfter: MaxBanAfter,
			BanWindow: MaxDuration, BanFor: MaxDuration, MaxTracked: MaxTracked,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Normalize(tt.in); got != tt.want {
				t.Errorf("Normalize(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestRecordCountsReasons(t *testing.T) {
	tests := []struct {
		name    string
		records []protocols.Reason
		want    map[protocols.Reason]uint64
	}{
		{"none", nil, map[protocols.Reason]uint64{}},
		{"each once", []protocols.Reason{
			protocols.ReasonTimeout, protocols.ReasonNoMatch, protocols.ReasonOversize,
			protocols.ReasonMalformed, protocols.ReasonPanic, protocols.ReasonRouted,
		}, map[protocols.Reason]uint64{
			protocols.ReasonTimeout: 1, protocols.ReasonNoMatch: 1, protocols.ReasonOversize: 1,
			protocols.ReasonMalformed: 1, protocols.ReasonPanic: 1, protocols.ReasonRouted: 1,
		}},
		{"repeats", []protocols.Reason{
			protocols.ReasonPanic, protocols.ReasonPanic, protocols.ReasonMalformed,
		}, map[protocols.Reason]uint64{protocols.ReasonPanic: 2, protocols.ReasonMalformed: 1}},
		{"unknown and none go to other", []protocols.Reason{
			protocols.ReasonNone, "weird", protocols.ReasonTimeout,
		}, map[protocols.Reason]uint64{ReasonOther: 2, protocols.ReasonTimeout: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _, _ := newTestBook(t, config.Quarantine{})
			for i, r := range tt.records {
				b.Record(peerN(i), r, nil)
			}
			st := b.Stats()
			if st.Landings != uint64(len(tt.records)) {
				t.Errorf("Landings = %d, want %d", st.Landings, len(tt.records))
			}
			if len(st.Reasons) != numReasonSlots {
				t.Errorf("Reasons has %d keys, want all %d", len(st.Reasons), numReasonSlots)
			}
			for i := range numReasonSlots {
				r := reasonAt(i)
				if st.Reasons[r] != tt.want[r] {
					t.Errorf("Reasons[%q] = %d, want %d", r, st.Reasons[r], tt.want[r])
				}
			}
		})
	}
}

func TestSampleHexCapped(t *testing.T) {
	long := bytes.Repeat([]byte{0xab}, 1000)
	tests := []struct {
		name        string
		sampleBytes int
		sample      []byte
		wantHex     string
	}{
		{"nil sample", 8, nil, ""},
		{"short", 8, []byte{1, 2, 3}, "010203"},
		{"exact", 4, []byte{0xde, 0xad, 0xbe, 0xef}, "deadbeef"},
		{"capped", 4, []byte{0xde, 0xad, 0xbe, 0xef, 0x01}, "deadbeef"},
		{"default cap 64", 0, long, strings.Repeat("ab", 64)},
		{"one byte cap", 1, []byte("GET /"), "47"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk, _ := newTestBook(t, config.Quarantine{SampleBytes: tt.sampleBytes})
			peer := netip.MustParseAddrPort("192.0.2.7:5020")
			b.Record(peer, protocols.ReasonNoMatch, tt.sample)
			got := b.Samples(nil)
			if len(got) != 1 {
				t.Fatalf("Samples = %d entries, want 1", len(got))
			}
			want := Sample{Peer: "192.0.2.7:5020", Reason: protocols.ReasonNoMatch,
				Hex: tt.wantHex, At: clk.now(), Bytes: len(tt.sample)}
			if got[0] != want {
				t.Errorf("Sample = %+v, want %+v", got[0], want)
			}
		})
	}
}

func TestRecordCopiesSample(t *testing.T) {
	b, _, _ := newTestBook(t, config.Quarantine{})
	buf := []byte{1, 2, 3}
	b.Record(peerN(1), protocols.ReasonNoMatch, buf)
	buf[0] = 9
	if got := b.Samples(nil)[0].Hex; got != "010203" {
		t.Errorf("sample changed with the caller's buffer: %s", got)
	}
}

func TestSamplesRing(t *testing.T) {
	tests := []struct{ records, want int }{
		{0, 0}, {1, 1}, {SamplesKept - 1, SamplesKept - 1}, {SamplesKept, SamplesKept},
		{SamplesKept + 1, SamplesKept}, {10 * SamplesKept, SamplesKept},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.records), func(t *testing.T) {
			b, clk, _ := newTestBook(t, config.Quarantine{})
			for i := range tt.records {
				b.Record(peerN(i), protocols.ReasonOversize, []byte{byte(i)})
				clk.advance(time.Millisecond)
			}
			prefix := []Sample{{Peer: "kept"}}
			got := b.Samples(prefix)
			if len(got) != 1+tt.want || got[0].Peer != "kept" {
				t.Fatalf("Samples appended %d (prefix %q), want %d after the prefix",
					len(got)-1, got[0].Peer, tt.want)
			}
			for k, s := range got[1:] {
				i := tt.records - 1 - k // newest first
				if s.Peer != peerN(i).String() || s.Hex != hex.EncodeToString([]byte{byte(i)}) {
					t.Errorf("sample %d = %+v, want record %d", k, s, i)
				}
				if k > 0 && !s.At.Before(got[k].At) {
					t.Errorf("sample %d not older than the one before", k)
				}
			}
		})
	}
}

func TestLogRateLimit(t *testing.T) {
	type burst struct {
		after   time.Duration // clock advance before the burst
		records int
	}
	tests := []struct {
		name           string
		rate           int
		bursts         []burst
		wantLines      int
		wantSuppressed uint64
	}{
		{"under the rate", 5, []burst{{0, 3}}, 3, 0},
		{"burst capped at rate", 5, []burst{{0, 100}}, 5, 95},
		{"refills after a second", 5, []burst{{0, 100}, {time.Second, 100}}, 10, 190},
		{"partial refill", 5, []burst{{0, 5}, {200 * time.Millisecond, 10}}, 6, 9},
		{"steady at the rate", 4, []burst{
			{0, 1}, {250 * time.Millisecond, 1}, {250 * time.Millisecond, 1}, {250 * time.Millisecond, 1},
			{250 * time.Millisecond, 1}, {250 * time.Millisecond, 1},
		}, 6, 0},
		{"long idle does not bank more than a burst", 3, []burst{{time.Hour, 10}}, 3, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk, logs := newTestBook(t, config.Quarantine{LogRate: tt.rate, BanAfter: 1 << 20})
			i := 0
			for _, bu := range tt.bursts {
				clk.advance(bu.after)
				for range bu.records {
					b.Record(peerN(i), protocols.ReasonNoMatch, []byte("x"))
					i++
				}
			}
			if got := logs.lines("msg=quarantined"); got != tt.wantLines {
				t.Errorf("logged %d lines, want %d", got, tt.wantLines)
			}
			if got := b.Stats().LogsSuppressed; got != tt.wantSuppressed {
				t.Errorf("LogsSuppressed = %d, want %d", got, tt.wantSuppressed)
			}
		})
	}
}

func TestLogLineReportsSuppressed(t *testing.T) {
	b, clk, logs := newTestBook(t, config.Quarantine{LogRate: 1})
	for range 4 {
		b.Record(peerN(1), protocols.ReasonNoMatch, []byte{0xff})
	}
	clk.advance(time.Second)
	b.Record(peerN(1), protocols.ReasonNoMatch, []byte{0xff})
	if logs.lines("suppressed=3") != 1 {
		t.Errorf("no line reports the 3 suppressed lines:\n%s", logs.buf.String())
	}
	if logs.lines("sample=ff") != 2 {
		t.Errorf("want the sample in both lines:\n%s", logs.buf.String())
	}
}

func TestNoLogNoTokens(t *testing.T) {
	clk := newFakeClock()
	log := slog.New(slog.NewTextHandler(&logBuffer{}, &slog.HandlerOptions{Level: slog.LevelError}))
	b := NewBook(config.Quarantine{LogRate: 1}, log, clk.now)
	for range 10 {
		b.Record(peerN(1), protocols.ReasonNoMatch, nil)
	}
	if got := b.Stats().LogsSuppressed; got != 0 {
		t.Errorf("lines the level drops counted as suppressed: %d", got)
	}
}

func TestBanAfterLandings(t *testing.T) {
	tests := []struct {
		name       string
		banAfter   int
		landings   int
		gap        time.Duration // between landings
		wantBanned bool
	}{
		{"one short", 3, 2, 0, false},
		{"exactly", 3, 3, 0, true},
		{"more", 3, 10, 0, true},
		{"ban after one", 1, 1, 0, true},
		{"spread inside the window", 3, 3, 20 * time.Second, true},
		{"spread beyond the window", 3, 3, 31 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk, logs := newTestBook(t, config.Quarantine{BanAfter: tt.banAfter, BanWindow: time.Minute})
			peer := netip.MustParseAddrPort("198.51.100.9:40000")
			for range tt.landings {
				b.Record(peer, protocols.ReasonMalformed, nil)
				clk.advance(tt.gap)
			}
			if got := b.Banned(peer.Addr()); got != tt.wantBanned {
				t.Errorf("Banned = %v, want %v", got, tt.wantBanned)
			}
			if b.Banned(netip.MustParseAddr("198.51.100.10")) {
				t.Error("another address is banned too")
			}
			st := b.Stats()
			if want := boolInt(tt.wantBanned); st.BansActive != want || st.BansTotal != uint64(want) {
				t.Errorf("BansActive, BansTotal = %d, %d, want %d", st.BansActive, st.BansTotal, want)
			}
			if got := logs.lines("msg=\"source banned\""); got != boolInt(tt.wantBanned) {
				t.Errorf("logged %d ban lines", got)
			}
		})
	}
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

func TestBanMappedAddresses(t *testing.T) {
	b, _, _ := newTestBook(t, config.Quarantine{BanAfter: 2})
	b.Record(netip.MustParseAddrPort("[::ffff:203.0.113.5]:1"), protocols.ReasonNoMatch, nil)
	b.Record(netip.MustParseAddrPort("203.0.113.5:2"), protocols.ReasonNoMatch, nil)
	for _, ip := range []string{"203.0.113.5", "::ffff:203.0.113.5"} {
		if !b.Banned(netip.MustParseAddr(ip)) {
			t.Errorf("Banned(%s) = false: mapped and plain IPv4 must be one source", ip)
		}
	}
}

func TestInvalidPeerNotTracked(t *testing.T) {
	b, _, _ := newTestBook(t, config.Quarantine{BanAfter: 1})
	b.Record(netip.AddrPort{}, protocols.ReasonPanic, []byte{1})
	st := b.Stats()
	if st.Tracked != 0 || st.BansTotal != 0 || st.Landings != 1 {
		t.Errorf("Stats = %+v, want one landing and nothing tracked", st)
	}
	if got := b.Samples(nil)[0].Peer; got != "" {
		t.Errorf("Peer = %q, want empty", got)
	}
}

func TestBanExpiry(t *testing.T) {
	b, clk, _ := newTestBook(t, config.Quarantine{BanAfter: 2, BanFor: 5 * time.Minute})
	peer := peerN(42)
	b.Record(peer, protocols.ReasonNoMatch, nil)
	b.Record(peer, protocols.ReasonNoMatch, nil)
	steps := []struct {
		advance time.Duration
		want    bool
	}{
		{0, true}, {4 * time.Minute, true}, {time.Minute - time.Nanosecond, true}, {time.Nanosecond, false},
	}
	for i, s := range steps {
		clk.advance(s.advance)
		if got := b.Banned(peer.Addr()); got != s.want {
			t.Fatalf("step %d: Banned = %v, want %v", i, got, s.want)
		}
	}
	if st := b.Stats(); st.BansActive != 0 || st.BansTotal != 1 {
		t.Errorf("after expiry BansActive, BansTotal = %d, %d, want 0, 1", st.BansActive, st.BansTotal)
	}
	if b.anyBans.Load() {
		t.Error("anyBans still set with no bans: Banned would keep taking the slow path")
	}
	// Landings while banned did not count; after the ban it starts afresh.
	b.Record(peer, protocols.ReasonNoMatch, nil)
	if b.Banned(peer.Addr()) {
		t.Error("one landing after expiry banned again")
	}
}

// TestClockOutOfOrder: a window that ended is not counted even when it is
// not at the front of the list (clock readings of concurrent callers, or an
// injected clock, need not be in order).
func TestClockOutOfOrder(t *testing.T) {
	b, clk, _ := newTestBook(t, config.Quarantine{BanAfter: 2, BanWindow: time.Minute})
	x, y := peerN(1), peerN(2)
	b.Record(y, protocols.ReasonNoMatch, nil) // front, window opens at T
	clk.advance(-5 * time.Second)
	b.Record(x, protocols.ReasonNoMatch, nil) // behind it, window opens at T-5s
	clk.advance(time.Minute)                  // T+55s: x's window is over, y's is not
	b.Record(x, protocols.ReasonNoMatch, nil)
	if b.Banned(x.Addr()) {
		t.Error("a landing from an ended window counted toward a ban")
	}
}

func TestLandingsWhileBannedNotTracked(t *testing.T) {
	b, clk, _ := newTestBook(t, config.Quarantine{BanAfter: 2, BanFor: time.Minute})
	peer := peerN(7)
	for range 10 {
		b.Record(peer, protocols.ReasonNoMatch, nil)
	}
	if st := b.Stats(); st.BansTotal != 1 || st.Tracked != 0 {
		t.Errorf("BansTotal, Tracked = %d, %d, want 1, 0", st.BansTotal, st.Tracked)
	}
	clk.advance(time.Minute)
	b.Record(peer, protocols.ReasonNoMatch, nil)
	if b.Banned(peer.Addr()) {
		t.Error("ban did not start afresh")
	}
}

func TestMaxTrackedBound(t *testing.T) {
	const limit = 100
	b, clk, _ := newTestBook(t, config.Quarantine{MaxTracked: limit, BanAfter: 3})
	for i := range 10 * limit {
		b.Record(peerN(i), protocols.ReasonNoMatch, nil)
		if n := b.landings.len(); n > limit {
			t.Fatalf("after %d sources %d are tracked, limit %d", i+1, n, limit)
		}
		clk.advance(time.Millisecond)
	}
	if st := b.Stats(); st.Tracked != limit {
		t.Errorf("Tracked = %d, want %d (the newest)", st.Tracked, limit)
	}
	// The oldest were evicted, the newest kept.
	if _, ok := b.landings.get(peerN(0).Addr()); ok {
		t.Error("oldest source still tracked")
	}
	if _, ok := b.landings.get(peerN(10*limit - 1).Addr()); !ok {
		t.Error("newest source not tracked")
	}
	// Expired windows are dropped on the next look.
	clk.advance(time.Hour)
	if st := b.Stats(); st.Tracked != 0 {
		t.Errorf("after the window Tracked = %d, want 0", st.Tracked)
	}
}

func TestMaxBansBound(t *testing.T) {
	const limit = 50
	b, clk, _ := newTestBook(t, config.Quarantine{MaxTracked: limit, BanAfter: 1})
	for i := range 10 * limit {
		b.Record(peerN(i), protocols.ReasonNoMatch, nil)
		if n := b.bans.len(); n > limit {
			t.Fatalf("after %d bans %d are held, limit %d", i+1, n, limit)
		}
		clk.advance(time.Millisecond)
	}
	st := b.Stats()
	if st.BansActive != limit || st.BansTotal != 10*limit {
		t.Errorf("BansActive, BansTotal = %d, %d, want %d, %d", st.BansActive, st.BansTotal, limit, 10*limit)
	}
	if b.Banned(peerN(0).Addr()) || !b.Banned(peerN(10*limit-1).Addr()) {
		t.Error("want the soonest-expiring bans evicted first")
	}
}

func TestCountRefused(t *testing.T) {
	b, _, _ := newTestBook(t, config.Quarantine{})
	for range 3 {
		b.CountRefused()
	}
	if got := b.Stats().Refused; got != 3 {
		t.Errorf("Refused = %d, want 3", got)
	}
}

func TestNilBook(t *testing.T) {
	var b *Book
	b.Record(peerN(1), protocols.ReasonPanic, []byte{1})
	b.CountRefused()
	if b.Banned(peerN(1).Addr()) {
		t.Error("nil book bans")
	}
	if got := b.Samples(nil); len(got) != 0 {
		t.Errorf("nil book has samples: %v", got)
	}
	if st := b.Stats(); st.Landings != 0 || st.Reasons == nil {
		t.Errorf("nil book Stats = %+v", st)
	}
}

func TestConcurrentRecordBanned(t *testing.T) {
	b := NewBook(config.Quarantine{BanAfter: 3, MaxTracked: 64, LogRate: 5},
		slog.New(slog.NewTextHandler(&logBuffer{}, nil)), nil)
	const goroutines, perG = 4, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			sample := make([]byte, 80)
			for i := range perG {
				sample[0] = byte(i)
				// 32 sources fit the 64 tracked, so every one reaches BanAfter.
				b.Record(peerN((g*perG+i)%32), protocols.ReasonNoMatch, sample)
			}
		})
		wg.Go(func() {
			for i := range perG {
				if b.Banned(peerN(i % 200).Addr()) {
					b.CountRefused()
				}
				if i%100 == 0 {
					_ = b.Stats()
					_ = b.Samples(nil)
				}
			}
		})
	}
	wg.Wait()
	st := b.Stats()
	if st.Landings != goroutines*perG {
		t.Errorf("Landings = %d, want %d", st.Landings, goroutines*perG)
	}
	if st.Tracked > 64 || st.BansActive > 64 {
		t.Errorf("bounds broken: Tracked %d, BansActive %d", st.Tracked, st.BansActive)
	}
	if st.BansTotal == 0 {
		t.Error("no bans with every source landing many times")
	}
}

func TestSilentTimeoutsDoNotBan(t *testing.T) {
	b := NewBook(config.Quarantine{BanAfter: 2}, nil, nil)
	for range 5 {
		b.Record(peerN(7), protocols.ReasonTimeout, nil)
	}
	if b.Banned(peerN(7).Addr()) {
		t.Fatal("silent timeouts banned a source")
	}
	if got := b.Stats().Reasons[protocols.ReasonTimeout]; got != 5 {
		t.Fatalf("timeouts counted %d, want 5", got)
	}
	b.Record(peerN(7), protocols.ReasonTimeout, []byte("G"))
	b.Record(peerN(7), protocols.ReasonTimeout, []byte("G"))
	if !b.Banned(peerN(7).Addr()) {
		t.Fatal("timeouts that sent bytes must count towards a ban")
	}
}
