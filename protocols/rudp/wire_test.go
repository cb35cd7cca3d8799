package rudp

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

func header(typ PacketType, flags byte, id uint64, pn uint32) []byte {
	b := AppendHeader(nil, Header{Type: typ, SessionID: id, Number: pn})
	b[3] = flags
	return b
}

// headerCases is ParseHeader's table; FuzzParseHeader is seeded from it.
var headerCases = []struct {
	name string
	in   []byte
	want Header
	err  error
}{
	{"data", header(TypeData, 0, 42, 7), Header{Type: TypeData, SessionID: 42, Number: 7}, nil},
	{"sealed initial", header(TypeInitial, 1, 1<<63, 0), Header{Type: TypeInitial, Sealed: true, SessionID: 1 << 63}, nil},
	{"retry", header(TypeRetry, 0, 9, 0), Header{Type: TypeRetry, SessionID: 9}, nil},
	{"handshake", header(TypeHandshake, 0, 9, 1<<31), Header{Type: TypeHandshake, SessionID: 9, Number: 1 << 31}, nil},
	{"short", header(TypeData, 0, 1, 1)[:15], Header{}, ErrShort},
	{"empty", nil, Header{}, ErrShort},
	{"magic", append([]byte{0xE3, 0x4D}, header(TypeData, 0, 1, 1)[2:]...), Header{}, ErrMagic},
	{"version 2", append([]byte{0xE3, 0x55, 0x24}, header(TypeData, 0, 1, 1)[3:]...), Header{}, ErrVersion},
	{"type 0", append([]byte{0xE3, 0x55, 0x10}, header(TypeData, 0, 1, 1)[3:]...), Header{}, ErrType},
	{"type 5", append([]byte{0xE3, 0x55, 0x15}, header(TypeData, 0, 1, 1)[3:]...), Header{}, ErrType},
	{"reserved flag", header(TypeData, 2, 1, 1), Header{}, ErrFlags},
	{"zero session", header(TypeData, 0, 0, 1), Header{}, ErrNoSession},
}

func TestParseHeader(t *testing.T) {
	for _, tc := range headerCases {
		got, err := ParseHeader(tc.in)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v, %v", tc.name, got, err, tc.want, tc.err)
		}
		if err == nil && !bytes.Equal(AppendHeader(nil, got), tc.in[:HeaderLen]) {
			t.Errorf("%s: does not encode back", tc.name)
		}
	}
}

// TestRoute: DATA by session id whatever the source (a rebinding keeps
// the worker), everything else by source address, the same on every call.
func TestRoute(t *testing.T) {
	a := netip.MustParseAddrPort("192.0.2.1:4000")
	b := netip.MustParseAddrPort("192.0.2.1:4001")
	for id := uint64(1); id < 50; id++ {
		d := header(TypeData, 0, id, 0)
		if Route(a, d, 7) != int(id%7) || Route(b, d, 7) != int(id%7) {
			t.Fatalf("id %d not routed to worker id mod 7", id)
		}
	}
	init := header(TypeInitial, 0, 12345, 0)
	if Route(a, init, 7) != Route(a, init, 7) || Route(a, init, 1) != 0 {
		t.Fatal("INITIAL routing is not a function of the address")
	}
	seen := map[int]bool{}
	for p := uint16(1000); p < 1100; p++ {
		w := Route(netip.AddrPortFrom(a.Addr(), p), init, 4)
		if w < 0 || w >= 4 {
			t.Fatalf("worker %d out of range", w)
		}
		seen[w] = true
	}
	if len(seen) != 4 {
		t.Fatalf("100 ports reach %d of 4 workers", len(seen))
	}
	if w := Route(a, []byte{1, 2}, 3); w < 0 || w >= 3 {
		t.Fatalf("short datagram routed to %d", w)
	}
}

func TestExpandNumber(t *testing.T) {
	cases := []struct {
		wire     uint32
		expected uint64
		want     uint64
	}{
		{5, 0, 5},
		{0xffffffff, 1 << 32, 0xffffffff},
		{2, 0xfffffffe, 1<<32 + 2},
		{0x80000000, 0, 0x80000000},
		{10, 1<<33 + 5, 1<<33 + 10},
		{0xfffffff0, 1<<33 + 5, 1<<33 - 16},
	}
	for _, c := range cases {
		if got := expandNumber(c.wire, c.expected); got != c.want {
			t.Errorf("expandNumber(%#x, %#x) = %#x, want %#x", c.wire, c.expected, got, c.want)
		}
	}
}

// frameCases are encoded frames and whether each packet type takes them;
// FuzzFrames is seeded from them.
func frameCases() []struct {
	name  string
	typ   PacketType
	b     []byte
	valid bool
} {
	ack := &ackFrame{cum: 100, delay: 3, window: 64, n: 2, ranges: [MaxSACKRanges]sackRange{{102, 105}, {110, 111}}}
	hello := &helloFrame{maxDatagram: 1200, window: 256, maxMessage: 65536, idleMillis: 30000, deviceID: []byte("dev-1")}
	withCookie := *hello
	withCookie.cookie = bytes.Repeat([]byte{7}, cookieLen)
	accept := &acceptFrame{nonce: 77, maxDatagram: 1200, window: 256, maxMessage: 1 << 16, idleMillis: 30000, keepaliveMillis: 10000}
	return []struct {
		name  string
		typ   PacketType
		b     []byte
		valid bool
	}{
		{"ack", TypeData, appendAck(nil, ack), true},
		{"ack no ranges", TypeData, appendAck(nil, &ackFrame{cum: 1, window: 4}), true},
		{"ack short", TypeData, appendAck(nil, ack)[:12], false},
		{"ack zero gap", TypeData, []byte{frameAck, 0, 0, 0, 1, 0, 0, 0, 4, 1, 0, 0, 0, 1}, false},
		{"ack 17 ranges", TypeData, append([]byte{frameAck, 0, 0, 0, 1, 0, 0, 0, 4, 17}, bytes.Repeat([]byte{0, 1, 0, 1}, 17)...), false},
		{"data first+last", TypeData, appendData(nil, 9, fragFirst|fragLast, []byte("hello")), true},
		{"data middle", TypeData, appendData(nil, 9, 0, []byte("x")), true},
		{"data empty message", TypeData, appendData(nil, 9, fragFirst|fragLast, nil), true},
		{"data empty middle", TypeData, appendData(nil, 9, fragFirst, nil), false},
		{"data truncated", TypeData, appendData(nil, 9, fragLast, []byte("hello"))[:9], false},
		{"datagram", TypeData, appendDatagram(nil, []byte("t=21.5")), true},
		{"datagram truncated", TypeData, appendDatagram(nil, []byte("t=21.5"))[:5], false},
		{"ping+padding", TypeData, []byte{framePing, 0, 0, 0}, true},
		{"path challenge", TypeData, appendPath(nil, framePathChallenge, 1<<60), true},
		{"path response short", TypeData, appendPath(nil, framePathResponse, 1)[:5], false},
		{"close", TypeData, appendClose(nil, CloseProtocol, "bad fragment"), true},
		{"close truncated", TypeData, appendClose(nil, CloseProtocol, "bad fragment")[:6], false},
		{"unknown frame", TypeData, []byte{0x0b}, false},
		{"hello in data", TypeData, appendHello(nil, hello), false},
		{"hello", TypeInitial, appendHello(nil, hello), true},
		{"hello with cookie and padding", TypeInitial, append(appendHello(nil, &withCookie), 0, 0), true},
		{"hello cookie of 3", TypeInitial, []byte{frameHello, 4, 176, 1, 0, 0, 1, 0, 0, 0, 0, 117, 48, 3, 1, 2, 3, 0}, false},
		{"two hellos", TypeInitial, appendHello(appendHello(nil, hello), hello), false},
		{"no hello", TypeInitial, []byte{0, 0}, false},
		{"hello then auth", TypeInitial, append(append(appendHello(nil, hello), frameAuth), make([]byte, authLen)...), true},
		{"auth not last", TypeInitial, append(append(append(appendHello(nil, hello), frameAuth), make([]byte, authLen)...), 0), false},
		{"data in initial", TypeInitial, append(appendHello(nil, hello), appendData(nil, 1, 3, []byte("x"))...), false},
		{"retry", TypeRetry, appendRetry(nil, bytes.Repeat([]byte{1}, cookieLen)), true},
		{"retry short cookie", TypeRetry, appendRetry(nil, []byte{1, 2}), false},
		{"accept", TypeHandshake, appendAccept(nil, accept), true},
		{"accept truncated", TypeHandshake, appendAccept(nil, accept)[:20], false},
		{"accept with ack", TypeHandshake, appendAck(appendAccept(nil, accept), ack), false},
	}
}

func TestCheckFrames(t *testing.T) {
	for _, tc := range frameCases() {
		err := checkFrames(tc.typ, tc.b)
		if (err == nil) != tc.valid {
			t.Errorf("%s: checkFrames = %v, want valid %v", tc.name, err, tc.valid)
		}
	}
}

// TestFrameRoundTrip: what the encoders write, the parsers read back.
func TestFrameRoundTrip(t *testing.T) {
	var f frame
	ack := ackFrame{cum: 0xfffffff0, delay: 9, window: 300, n: 2, ranges: [MaxSACKRanges]sackRange{{0xfffffff2, 3}, {10, 12}}}
	if _, err := parseFrame(appendAck(nil, &ack), &f); err != nil || f.ack != ack {
		t.Fatalf("ack across the wrap: %+v, %v", f.ack, err)
	}
	if _, err := parseFrame(appendData(nil, 5, fragLast, []byte("ab")), &f); err != nil || f.data.seq != 5 || f.data.flags != fragLast || string(f.data.data) != "ab" {
		t.Fatalf("data: %+v, %v", f.data, err)
	}
	acc := acceptFrame{nonce: 1, maxDatagram: 2, window: 3, maxMessage: 4, idleMillis: 5, keepaliveMillis: 6}
	if _, err := parseFrame(appendAccept(nil, &acc), &f); err != nil || f.accept != acc {
		t.Fatalf("accept: %+v, %v", f.accept, err)
	}
	h := helloFrame{maxDatagram: 1, window: 2, maxMessage: 3, idleMillis: 4, cookie: bytes.Repeat([]byte{5}, cookieLen), deviceID: []byte("d")}
	if _, err := parseFrame(appendHello(nil, &h), &f); err != nil || f.hello.window != 2 || f.hello.maxMessage != 3 ||
		!bytes.Equal(f.hello.cookie, h.cookie) || string(f.hello.deviceID) != "d" {
		t.Fatalf("hello: %+v, %v", f.hello, err)
	}
	long := string(bytes.Repeat([]byte{'r'}, 300))
	if _, err := parseFrame(appendClose(nil, 7, long), &f); err != nil || f.close.code != 7 || len(f.close.reason) != MaxCloseReason {
		t.Fatalf("close: %+v, %v", f.close, err)
	}
}

func TestReplayWindow(t *testing.T) {
	var w replayWindow
	for _, pn := range []uint64{0, 1, 5, 3, 200, 199, 73} {
		if w.seen(pn) {
			t.Fatalf("%d seen before it came", pn)
		}
		w.mark(pn)
		if !w.seen(pn) {
			t.Fatalf("%d not seen after it came", pn)
		}
	}
	if w.seen(2) == false { // 200-2 >= 128: too old to tell, refused
		t.Fatal("a number older than the window is accepted")
	}
	if w.seen(198) || w.seen(100) {
		t.Fatal("numbers in the window that never came are refused")
	}
	if w.expected() != 201 {
		t.Fatalf("expected %d", w.expected())
	}
}

// TestSealIntoFullBuffer: sealing a packet in a buffer with no spare
// capacity grows it (it used to slice past the capacity and panic).
func TestSealIntoFullBuffer(t *testing.T) {
	c2s, _ := sessionKeys(bytes.Repeat([]byte{1}, 32), 1, 2)
	var n aeadNonce
	for _, extra := range []int{0, 5, tagLen} {
		b := AppendHeader(make([]byte, 0, HeaderLen+3+extra), Header{Type: TypeData, Sealed: true, SessionID: 2})
		b = append(b, framePing, framePing, framePing)
		sealed := sealPacket(b, 0, c2s, &n, 7)
		frames, err := openPacket(nil, sealed, c2s, &n, 7)
		if err != nil || !bytes.Equal(frames, []byte{framePing, framePing, framePing}) {
			t.Fatalf("extra %d: %x, %v", extra, frames, err)
		}
	}
}
