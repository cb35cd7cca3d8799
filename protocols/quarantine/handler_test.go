package quarantine

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
)

// fakeConn is the part of a worker the session sees: Close calls the
// session's Closed synchronously, once, as the worker does.
type fakeConn struct {
	peer    netip.AddrPort
	reason  protocols.Reason
	sess    protocols.Session
	closes  int
	closeBy error
}

func (c *fakeConn) ID() uint64               { return 1 << 32 }
func (c *fakeConn) Peer() netip.AddrPort     { return c.peer }
func (c *fakeConn) Reason() protocols.Reason { return c.reason }
func (c *fakeConn) Write([]byte) error       { return protocols.ErrClosed }
func (c *fakeConn) Buffered() int            { return 0 }
func (c *fakeConn) Notify()                  {}
func (c *fakeConn) CountDropped(int)         {}
func (c *fakeConn) SetTimer(time.Duration)   {}

func (c *fakeConn) Close(reason error) {
	c.closes++
	if c.closes > 1 {
		return
	}
	c.closeBy = reason
	c.sess.Closed(reason)
}

func openSession(t testing.TB, h *Handler, reason protocols.Reason) *fakeConn {
	t.Helper()
	c := &fakeConn{peer: netip.MustParseAddrPort("192.0.2.1:502"), reason: reason}
	s, err := h.Open(c)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	c.sess = s
	return c
}

func TestSessionData(t *testing.T) {
	tests := []struct {
		name        string
		reason      protocols.Reason
		sampleBytes int
		chunks      []string
		closedAfter int // index of the chunk after which the session closes; -1 = stays open
		wantSample  string
	}{
		{"no-match closes on first data", protocols.ReasonNoMatch, 8, []string{"hello"}, 0, "hello"},
		{"oversize closes and caps", protocols.ReasonOversize, 4, []string{"abcdefgh"}, 0, "abcd"},
		{"routed closes", protocols.ReasonRouted, 8, []string{"x", "y"}, 0, "x"},
		{"malformed closes", protocols.ReasonMalformed, 8, []string{"\x00\x01"}, 0, "\x00\x01"},
		{"timeout holds until full", protocols.ReasonTimeout, 4, []string{"ab", "c", "def", "zz"}, 2, "abcd"},
		{"timeout short stays open", protocols.ReasonTimeout, 8, []string{"ab", "cd"}, -1, "abcd"},
		{"timeout exact fill", protocols.ReasonTimeout, 4, []string{"abcd"}, 0, "abcd"},
		{"timeout empty chunk", protocols.ReasonTimeout, 4, []string{""}, -1, ""},
		{"unknown reason closes", protocols.ReasonNone, 8, []string{"q"}, 0, "q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _, _ := newTestBook(t, config.Quarantine{SampleBytes: tt.sampleBytes})
			c := openSession(t, NewHandler(b, config.Quarantine{SampleBytes: tt.sampleBytes}), tt.reason)
			closedAt := -1
			for i, chunk := range tt.chunks {
				n, err := c.sess.Data([]byte(chunk))
				if n != len(chunk) || err != nil {
					t.Fatalf("chunk %d: Data = %d, %v, want %d, nil", i, n, err, len(chunk))
				}
				if c.closes > 0 && closedAt < 0 {
					closedAt = i
				}
			}
			if closedAt != tt.closedAfter {
				t.Fatalf("closed after chunk %d, want %d", closedAt, tt.closedAfter)
			}
			if c.closes > 1 {
				t.Errorf("Close called %d times", c.closes)
			}
			if closedAt < 0 {
				c.Close(protocols.ErrIdle) // the worker's idle timer
			} else if !errors.Is(c.closeBy, ErrQuarantined) {
				t.Errorf("closed with %v, want ErrQuarantined", c.closeBy)
			}
			checkOneRecord(t, b, tt.reason, tt.wantSample)
		})
	}
}

func checkOneRecord(t *testing.T, b *Book, reason protocols.Reason, wantSample string) {
	t.Helper()
	st := b.Stats()
	if st.Landings != 1 || st.Reasons[reason] != 1 && reasonIndex(reason) != len(reasonSlots) {
		t.Errorf("Stats = %+v, want one landing for %q", st, reason)
	}
	s := b.Samples(nil)
	if len(s) != 1 {
		t.Fatalf("%d samples, want 1", len(s))
	}
	if want := hex.EncodeToString([]byte(wantSample)); s[0].Hex != want || s[0].Reason != reason {
		t.Errorf("sample = %q (%q), want %q (%q)", s[0].Hex, s[0].Reason, want, reason)
	}
	if s[0].Peer != "192.0.2.1:502" {
		t.Errorf("peer = %q", s[0].Peer)
	}
}

func TestSessionSilentIdle(t *testing.T) {
	b, _, _ := newTestBook(t, config.Quarantine{})
	c := openSession(t, NewHandler(b, config.Quarantine{}), protocols.ReasonTimeout)
	c.Close(protocols.ErrIdle)
	checkOneRecord(t, b, protocols.ReasonTimeout, "")
}

func TestSessionClosedOnce(t *testing.T) {
	b, _, _ := newTestBook(t, config.Quarantine{})
	c := openSession(t, NewHandler(b, config.Quarantine{}), protocols.ReasonNoMatch)
	c.sess.Closed(protocols.ErrPeerClosed)
	c.sess.Closed(protocols.ErrShutdown)
	if n, err := c.sess.Data([]byte("late")); n != 4 || err != nil {
		t.Errorf("Data after Closed = %d, %v, want 4, nil", n, err)
	}
	if got := b.Stats().Landings; got != 1 {
		t.Errorf("Landings = %d, want exactly 1", got)
	}
	if c.closes != 0 {
		t.Errorf("Data after Closed called Close")
	}
}

func TestSessionDrainsAfterClose(t *testing.T) {
	b, _, _ := newTestBook(t, config.Quarantine{})
	h := NewHandler(b, config.Quarantine{})
	c := &fakeConn{peer: netip.MustParseAddrPort("192.0.2.1:502"), reason: protocols.ReasonNoMatch}
	s, _ := h.Open(c)
	c.sess = &deferredClose{} // the worker closes later, not inside Close
	big := []byte(strings.Repeat("z", 10000))
	for range 3 {
		if n, _ := s.Data(big); n != len(big) {
			t.Fatalf("consumed %d of %d", n, len(big))
		}
	}
	if c.closes != 1 {
		t.Errorf("Close called %d times, want 1", c.closes)
	}
	s.Closed(ErrQuarantined)
	if got := b.Samples(nil)[0].Hex; len(got) != 2*DefaultSampleBytes {
		t.Errorf("sample hex %d chars, want %d", len(got), 2*DefaultSampleBytes)
	}
}

type deferredClose struct{}

func (deferredClose) Data(in []byte) (int, error) { return len(in), nil }
func (deferredClose) Closed(error)                {}

func TestSessionIsSmall(t *testing.T) {
	if size := unsafe.Sizeof(session{}); size > 128 {
		t.Errorf("session is %d bytes, want at most 128", size)
	}
}

func TestHandlerNilBook(t *testing.T) {
	c := openSession(t, NewHandler(nil, config.Quarantine{}), protocols.ReasonPanic)
	if _, err := c.sess.Data([]byte("boom")); err != nil {
		t.Fatal(err)
	}
	if c.closes != 1 {
		t.Errorf("closes = %d, want 1", c.closes)
	}
}
