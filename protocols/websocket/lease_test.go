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
	var b bytes.Buffer
	w, err := flate.NewWriter(&b, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(msg))
	w.Flush()
	return clientFrame(0x80|0x40|byte(OpText), bytes.TrimSuffix(b.Bytes(), []byte{0, 0, 0xff, 0xff}))
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
