package quarantine

import (
	"net/netip"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
)

// bookWithBans returns a book holding n bans (ban_after 1), on the real
// clock so the bans stay in force through a benchmark.
func bookWithBans(n int) *Book {
	b := NewBook(config.Quarantine{BanAfter: 1, MaxTracked: n, BanFor: time.Hour}, nil, nil)
	for i := range n {
		b.Record(peerN(i), protocols.ReasonNoMatch, nil)
	}
	return b
}

func TestBannedNoBansZeroAlloc(t *testing.T) {
	b := NewBook(config.Quarantine{}, nil, nil)
	ip := netip.MustParseAddr("192.0.2.1")
	if n := testing.AllocsPerRun(1000, func() { _ = b.Banned(ip) }); n != 0 {
		t.Errorf("Banned with no bans: %v allocs, want 0", n)
	}
}

func TestBannedWithBansZeroAlloc(t *testing.T) {
	b := bookWithBans(1000)
	if !b.Banned(peerN(10).Addr()) {
		t.Fatal("setup: source not banned")
	}
	miss, hit := netip.MustParseAddr("203.0.113.1"), peerN(10).Addr()
	if n := testing.AllocsPerRun(1000, func() { _, _ = b.Banned(miss), b.Banned(hit) }); n != 0 {
		t.Errorf("Banned with bans: %v allocs, want 0", n)
	}
}

// TestRecordSteadyZeroAlloc: once the tracking lists have grown, recording
// with logging off allocates nothing (the ring copies into its own array).
func TestRecordSteadyZeroAlloc(t *testing.T) {
	b := NewBook(config.Quarantine{MaxTracked: 64, BanAfter: 1 << 20}, nil, nil)
	sample := make([]byte, 100)
	for i := range 256 {
		b.Record(peerN(i), protocols.ReasonNoMatch, sample)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		b.Record(peerN(i%256), protocols.ReasonNoMatch, sample)
		i++
	}); n != 0 {
		t.Errorf("Record: %v allocs, want 0", n)
	}
}

func BenchmarkBannedNoBans(b *testing.B) {
	book := NewBook(config.Quarantine{}, nil, nil)
	ip := netip.MustParseAddr("192.0.2.1")
	b.ReportAllocs()
	for b.Loop() {
		if book.Banned(ip) {
			b.Fatal("banned")
		}
	}
}

func BenchmarkBanned10kBans(b *testing.B) {
	book := bookWithBans(10000)
	miss, hit := netip.MustParseAddr("203.0.113.1"), peerN(5000).Addr()
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = book.Banned(miss)
		}
	})
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = book.Banned(hit)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = book.Banned(miss)
			}
		})
	})
}

func BenchmarkRecord(b *testing.B) {
	sample := make([]byte, 512)
	b.Run("nolog", func(b *testing.B) {
		book := NewBook(config.Quarantine{BanAfter: 1 << 20}, nil, nil)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			book.Record(peerN(i%20000), protocols.ReasonNoMatch, sample)
			i++
		}
	})
	b.Run("bans", func(b *testing.B) {
		book := NewBook(config.Quarantine{BanAfter: 3}, nil, nil)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			book.Record(peerN(i%20000), protocols.ReasonNoMatch, sample)
			i++
		}
	})
}

func BenchmarkSession(b *testing.B) {
	book := NewBook(config.Quarantine{BanAfter: 1 << 20}, nil, nil)
	h := NewHandler(book, config.Quarantine{})
	c := &fakeConn{peer: peerN(1), reason: protocols.ReasonNoMatch}
	in := []byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not a known protocol at all")
	b.ReportAllocs()
	for b.Loop() {
		s, _ := h.Open(c)
		c.sess, c.closes = s, 0
		_, _ = s.Data(in)
	}
}
