package quarantine

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
)

// FuzzSession feeds a session arbitrary input in arbitrary chunks: it must
// consume everything, sample exactly the capped prefix (only the first
// chunk unless it is holding a silent connection), close at most once and
// record exactly once.
func FuzzSession(f *testing.F) {
	seeds := []struct {
		reason      protocols.Reason
		sampleBytes int
		input       string
		split       byte
	}{
		{protocols.ReasonNoMatch, 8, "hello", 2},
		{protocols.ReasonOversize, 4, "abcdefgh", 3},
		{protocols.ReasonTimeout, 4, "abcdef", 1},
		{protocols.ReasonTimeout, 64, "", 0},
		{protocols.ReasonRouted, 1, "\x00\x01\x02", 1},
		{protocols.ReasonNone, 16, "GET / HTTP/1.1\r\n", 5},
	}
	for _, s := range seeds {
		f.Add(string(s.reason), s.sampleBytes, []byte(s.input), s.split)
	}
	f.Fuzz(func(t *testing.T, reason string, sampleBytes int, input []byte, split byte) {
		cfg := config.Quarantine{SampleBytes: sampleBytes % 200}
		b := NewBook(cfg, nil, newFakeClock().now)
		c := openSession(t, NewHandler(b, cfg), protocols.Reason(reason))
		chunk := int(split%16) + 1
		for rest := input; len(rest) > 0; {
			n := min(chunk, len(rest))
			got, err := c.sess.Data(rest[:n])
			if got != n || err != nil {
				t.Fatalf("Data = %d, %v, want %d, nil", got, err, n)
			}
			rest = rest[n:]
		}
		c.Close(protocols.ErrIdle)
		if c.closes > 2 { // ours at most once, plus the idle close above
			t.Fatalf("Close called %d times", c.closes)
		}
		samples := b.Samples(nil)
		if len(samples) != 1 || b.Stats().Landings != 1 {
			t.Fatalf("%d samples, %d landings, want 1 each", len(samples), b.Stats().Landings)
		}
		limit := Normalize(cfg).SampleBytes
		want := input[:min(len(input), limit)]
		if protocols.Reason(reason) != protocols.ReasonTimeout {
			want = want[:min(len(want), chunk)] // closed after the first chunk
		}
		if samples[0].Hex != hex.EncodeToString(want) {
			t.Fatalf("sample %s, want %x", samples[0].Hex, want)
		}
	})
}

// FuzzRecord records arbitrary peers, reasons and samples: the book must
// keep a capped copy, never panic, and keep its bounds.
func FuzzRecord(f *testing.F) {
	f.Add([]byte{192, 0, 2, 1}, uint16(502), "no-match", []byte("hello"), 4)
	f.Add([]byte{}, uint16(0), "", []byte{}, 0)
	f.Add(bytes.Repeat([]byte{0xfe}, 16), uint16(65535), "panic", bytes.Repeat([]byte{1}, 300), 64)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, uint16(1), "timeout", []byte{0}, -5)
	f.Fuzz(func(t *testing.T, ip []byte, port uint16, reason string, sample []byte, sampleBytes int) {
		addr, _ := netip.AddrFromSlice(ip)
		peer := netip.AddrPortFrom(addr, port)
		cfg := config.Quarantine{SampleBytes: sampleBytes % 300, BanAfter: 2, MaxTracked: 2}
		b := NewBook(cfg, nil, newFakeClock().now)
		for range 3 {
			b.Record(peer, protocols.Reason(reason), sample)
		}
		limit := Normalize(cfg).SampleBytes
		s := b.Samples(nil)
		if len(s) != 3 {
			t.Fatalf("%d samples, want 3", len(s))
		}
		if want := hex.EncodeToString(sample[:min(len(sample), limit)]); s[0].Hex != want || s[0].Bytes != len(sample) {
			t.Fatalf("sample %q (%d bytes), want %q (%d)", s[0].Hex, s[0].Bytes, want, len(sample))
		}
		st := b.Stats()
		if st.Tracked > 2 || st.BansActive > 2 || st.Landings != 3 {
			t.Fatalf("Stats = %+v", st)
		}
		// A timeout with no byte received never counts toward a ban (a
		// browser's speculative preconnect), so it bans no one.
		counts := protocols.Reason(reason) != protocols.ReasonTimeout || len(sample) > 0
		if want := addr.IsValid() && counts; b.Banned(addr) != want {
			t.Fatalf("Banned(%v) = %v after 3 %q landings (%d sample bytes) with ban_after 2, want %v",
				addr, b.Banned(addr), reason, len(sample), want)
		}
	})
}
