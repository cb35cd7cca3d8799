package websocket

import (
	"bytes"
	"compress/flate"
	"errors"
	"testing"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
)

const offerDeflate = "Sec-WebSocket-Extensions: permessage-deflate\r\n"

// deflated is msg as a compressed client text frame (RSV1 set, the
// trailing empty block cut off as RFC 7692 says).
func deflated(t *testing.T, msg string) []byte {
	t.Helper()
	return clientFrame(0x80|0x40|byte(OpText), bytes.TrimSuffix(compressed(msg, false), []byte{0, 0, 0xff, 0xff}))
}

// compressed is msg compressed, flushed with an empty block or, if final, ended
// with a final block (BFINAL set, which RFC 7692 §7.2.3.4 allows), where
// an inflater stops whatever bytes follow.
func compressed(msg string, final bool) []byte {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestSpeed) // fails only for a bad level
	w.Write([]byte(msg))
	if final {
		w.Close()
	} else {
		w.Flush()
	}
	return b.Bytes()
}

// replyIsCompressed reports whether the session's one reply frame has
// RSV1 set, and clears the output.
func replyIsCompressed(t *testing.T, o *offline) bool {
	t.Helper()
	h, n, err := ParseHeader(o.conn.out)
	if err != nil || n == 0 || o.conn.closed {
		t.Fatalf("no reply: %q, closed %v (%v)", o.conn.out, o.conn.closed, o.conn.reason)
	}
	o.conn.out = o.conn.out[:0]
	return h.RSV&0x4 != 0
}

// Sessions with and without permessage-deflate take turns on one handler:
// each must get a gorilla Conn of its own kind from the leases every call.
func TestLeasesKeepVariantsApart(t *testing.T) {
	h := New(config.WebSocket{Compression: true}, bus.New(bus.Options{}), nil)
	var plain, packed []*offline
	for range 3 {
		plain = append(plain, newOffline(t, h))
		packed = append(packed, newOffline(t, h, offerDeflate))
	}
	for round := range 4 {
		for i := range plain {
			plain[i].send(`{"op":"ping"}`)
			if replyIsCompressed(t, plain[i]) {
				t.Fatalf("round %d: a plain session answered with a compressed frame", round)
			}
			packed[i].feed(deflated(t, `{"op":"ping"}`))
			if !replyIsCompressed(t, packed[i]) {
				t.Fatalf("round %d: a deflate session answered uncompressed", round)
			}
		}
	}
	for _, o := range append(plain, packed...) {
		if s := o.sess.(*session); s.l != nil {
			t.Fatal("a session kept its lease between calls")
		}
	}
}

// A call that fails leaves its gorilla Conn with a sticky error (a read
// error, or the close frame it sent): that Conn must never serve another
// session.
func TestFailedCallDropsItsLease(t *testing.T) {
	b := bus.New(bus.Options{})
	h := New(config.WebSocket{Compression: true}, b, nil)
	for _, tt := range []struct {
		name   string
		frames []byte
		reason error
	}{
		{"corrupt deflate", clientFrame(0x80|0x40|byte(OpText), []byte{0xff, 0xff, 0xff, 0xff}), ErrInvalidPayload},
		{"peer close", clientFrame(finClose, []byte{0x03, 0xe8}), ErrPeerClose},
	} {
		for range 4 {
			bad := newOffline(t, h, offerDeflate)
			bad.feed(tt.frames)
			if !errors.Is(bad.conn.reason, tt.reason) {
				t.Fatalf("%s: closed with %v", tt.name, bad.conn.reason)
			}
			good := newOffline(t, h, offerDeflate)
			good.feed(deflated(t, `{"op":"pub","topic":"ok","data":1}`))
			good.feed(deflated(t, `{"op":"ping"}`))
			if good.conn.closed || !replyIsCompressed(t, good) {
				t.Fatalf("after %s: the next session closed with %v", tt.name, good.conn.reason)
			}
		}
	}
	if got := h.Stats().Published; got != 8 {
		t.Errorf("published %d, want 8", got)
	}
}

// A compressed message whose deflate stream ends before its frames do
// leaves bytes that gorilla never reads, unless the inflater's own
// read-ahead swallowed them (it reads 4 KiB at a time). What gorilla did
// not read must not stay in a pooled Conn, where the next session's read
// would start with it: the session closes with 1007 and drops the lease.
func TestDeflateStreamEndingEarly(t *testing.T) {
	h := New(config.WebSocket{Compression: true, MaxMessage: 1 << 20}, bus.New(bus.Options{}), nil)
	stream := compressed(`{"op":"ping"}`, true)
	junk := bytes.Repeat([]byte{0x81, 0x05, 'h', 'e', 'l', 'l', 'o'}, 3000) // 21 KB
	for _, tt := range []struct {
		name     string
		frames   []byte
		mustFail bool // else the junk was swallowed whole and may be ignored
	}{
		{"a few bytes in the frame", clientFrame(0x80|0x40|byte(OpText), append(append([]byte{}, stream...), 1, 2, 3)), false},
		{"21 KB in the frame", clientFrame(0x80|0x40|byte(OpText), append(append([]byte{}, stream...), junk...)), true},
		// gorilla's read buffer takes both frames; the inflater stops
		// after the first: only the buffer holds the rest.
		{"a small continuation frame", append(clientFrame(0x40|byte(OpText), stream), clientFrame(finCont, junk[:70])...), true},
		{"21 KB in continuation frames", append(append(clientFrame(0x40|byte(OpText), stream), clientFrame(byte(OpContinuation), junk[:7000])...),
			clientFrame(finCont, junk[7000:])...), true},
	} {
		for range 3 {
			bad := newOffline(t, h, offerDeflate)
			bad.feed(tt.frames)
			if tt.mustFail && !errors.Is(bad.conn.reason, ErrInvalidPayload) {
				t.Fatalf("%s: closed %v with %v, want invalid payload (1007)", tt.name, bad.conn.closed, bad.conn.reason)
			}
			good := newOffline(t, h, offerDeflate)
			good.feed(deflated(t, `{"op":"ping"}`))
			if good.conn.closed || !replyIsCompressed(t, good) {
				t.Fatalf("after %s: the next session closed with %v", tt.name, good.conn.reason)
			}
		}
	}
}

// FuzzLeaseIsolation: whatever one session is fed, the next session of the
// same kind on the same handler (which gets the first one's lease back if
// it was pooled) still answers a ping.
func FuzzLeaseIsolation(f *testing.F) {
	f.Add([]byte{}, false)
	f.Add(clientFrame(finText, []byte(`{"op":"ping"}`)), false)
	f.Add(clientFrame(finText, []byte(`{"op":"pub","topic":"a","data":"x"}`)), true)
	f.Add(append(clientFrame(byte(OpText), []byte(`{"op":`)), clientFrame(finCont, []byte(`"ping"}`))...), false)
	f.Add(clientFrame(0x80|0x40|byte(OpText), []byte{0xff, 0xff, 0xff, 0xff}), true)
	f.Add(clientFrame(finClose, []byte{0x03, 0xe8}), true)
	f.Add(clientFrame(finText, []byte{0xff}), false)
	// A deflate stream that ends in its first frame, a short continuation
	// frame after it (TestDeflateStreamEndingEarly).
	f.Add(append(clientFrame(0x40|byte(OpText), compressed(`{"op":"ping"}`, true)), clientFrame(finCont, []byte("junk after the final block"))...), true)
	f.Fuzz(func(t *testing.T, data []byte, compressed bool) {
		h := New(config.WebSocket{Compression: true, MaxMessage: 4096}, bus.New(bus.Options{}), nil)
		var extra []string
		if compressed {
			extra = append(extra, offerDeflate)
		}
		first := newOffline(t, h, extra...)
		first.feed(data)
		next := newOffline(t, h, extra...)
		ping := clientFrame(finText, []byte(`{"op":"ping"}`))
		if compressed {
			ping = deflated(t, `{"op":"ping"}`)
		}
		next.feed(ping)
		if next.conn.closed || replyIsCompressed(t, next) != compressed {
			t.Fatalf("after %q: the next session closed with %v", data, next.conn.reason)
		}
	})
}
