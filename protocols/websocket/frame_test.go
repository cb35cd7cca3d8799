package websocket

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseHeader(t *testing.T) {
	mask := []byte{1, 2, 3, 4}
	tests := []struct {
		name    string
		in      []byte
		want    Header
		n       int
		wantErr error
	}{
		{"empty", nil, Header{}, 0, nil},
		{"one byte", []byte{0x81}, Header{}, 0, nil},
		{"unmasked short", []byte{0x81, 0x05}, Header{Fin: true, Opcode: OpText, Length: 5, Size: 2}, 2, nil},
		{"masked short", append([]byte{0x82, 0x85}, mask...),
			Header{Fin: true, Opcode: OpBinary, Masked: true, Mask: [4]byte{1, 2, 3, 4}, Length: 5, Size: 6}, 6, nil},
		{"masked, key cut", []byte{0x82, 0x85, 1, 2}, Header{}, 0, nil},
		{"16-bit length", append([]byte{0x01, 0xfe, 0x01, 0x00}, mask...),
			Header{Opcode: OpText, Masked: true, Mask: [4]byte{1, 2, 3, 4}, Length: 256, Size: 8}, 8, nil},
		{"16-bit length cut", []byte{0x01, 0xfe, 0x01}, Header{}, 0, nil},
		{"64-bit length", append([]byte{0x80, 0xff, 0, 0, 0, 1, 0, 0, 0, 0}, mask...),
			Header{Fin: true, Opcode: OpContinuation, Masked: true, Mask: [4]byte{1, 2, 3, 4}, Length: 1 << 32, Size: 14}, 14, nil},
		{"64-bit length top bit", []byte{0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0}, Header{}, 0, ErrProtocol},
		{"rsv bits", []byte{0xf1, 0x00}, Header{Fin: true, RSV: 7, Opcode: OpText, Size: 2}, 2, nil},
		{"reserved opcode parses", []byte{0x8b, 0x00}, Header{Fin: true, Opcode: 0xb, Size: 2}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, n, err := ParseHeader(tt.in)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if h != tt.want || n != tt.n {
				t.Errorf("ParseHeader = %+v, %d; want %+v, %d", h, n, tt.want, tt.n)
			}
		})
	}
}

// scanResult is what a whole stream scans to, however it is split:
// control frames (opcode and unmasked payload) and data messages (their
// raw bytes), in order, and the error that ended it.
type scanResult struct {
	items []string
	err   error
	rest  int // bytes left unconsumed at the end
}

// scanAll drives a Scanner over data cut into chunks, keeping unconsumed
// bytes like the worker does.
func scanAll(sc Scanner, data []byte, cuts []int) scanResult {
	var res scanResult
	var pending, msg []byte
	feed := func(chunk []byte) bool {
		pending = append(pending, chunk...)
		for {
			ev, err := sc.Next(pending)
			if err != nil {
				res.err = err
				return false
			}
			switch ev.Kind {
			case NeedMore:
				return true
			case Control:
				p := append([]byte(nil), pending[ev.Header.Size:ev.N]...)
				unmask(ev.Header.Mask, p)
				res.items = append(res.items, fmt.Sprintf("ctl %x %q", uint8(ev.Header.Opcode), p))
			default:
				msg = append(msg, pending[:ev.N]...)
				if ev.End {
					res.items = append(res.items, fmt.Sprintf("msg %x", msg))
					msg = nil
				}
			}
			pending = pending[ev.N:]
		}
	}
	for _, c := range cuts {
		c = min(c, len(data))
		if !feed(data[:c]) {
			return res
		}
		data = data[c:]
	}
	if feed(data) {
		res.rest = len(pending) + len(msg)
	}
	return res
}

// errName reduces an error to its sentinel for comparisons.
func errName(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, ErrTooBig):
		return "too-big"
	case errors.Is(err, ErrProtocol):
		return "protocol"
	}
	return "other: " + err.Error()
}

func cat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

var scannerCases = []struct {
	name    string
	deflate bool
	max     int64
	in      []byte
	items   int    // control frames plus messages
	err     string // errName of the error
	rest    int
}{
	{"one text", false, 100, clientFrame(finText, []byte("hello")), 1, "nil", 0},
	{"empty text", false, 100, clientFrame(finText, nil), 1, "nil", 0},
	{"ping", false, 100, clientFrame(finPing, []byte("p")), 1, "nil", 0},
	{"pong and close", false, 100, cat(clientFrame(finPong, nil), clientFrame(finClose, []byte{3, 232})), 2, "nil", 0},
	{"fragments", false, 100, cat(clientFrame(byte(OpText), []byte("ab")), clientFrame(byte(OpContinuation), []byte("cd")),
		clientFrame(finCont, []byte("ef"))), 1, "nil", 0},
	{"ping inside fragments", false, 100, cat(clientFrame(byte(OpText), []byte("ab")), clientFrame(finPing, []byte("x")),
		clientFrame(finCont, []byte("cd"))), 2, "nil", 0},
	{"16-bit frame", false, 1000, clientFrame(finBinary, bytes.Repeat([]byte{7}, 300)), 1, "nil", 0},
	{"half a frame", false, 100, clientFrame(finText, []byte("hello"))[:8], 0, "nil", 8},
	{"half a header", false, 100, []byte{0x81, 0xfe, 0}, 0, "nil", 3},
	{"unmasked", false, 100, []byte{0x81, 0x01, 'a'}, 0, "protocol", 0},
	{"reserved data opcode", false, 100, clientFrame(0x83, nil), 0, "protocol", 0},
	{"reserved control opcode", false, 100, clientFrame(0x8b, nil), 0, "protocol", 0},
	{"rsv1 without deflate", false, 100, clientFrame(0xc1, []byte("x")), 0, "protocol", 0},
	{"rsv1 with deflate", true, 100, clientFrame(0xc1, []byte("x")), 1, "nil", 0},
	{"rsv1 on continuation", true, 100, cat(clientFrame(0x41, []byte("x")), clientFrame(0xc0, []byte("y"))), 0, "protocol", 0},
	{"rsv1 on ping", true, 100, clientFrame(0xc9, nil), 0, "protocol", 0},
	{"rsv2", false, 100, clientFrame(0xa1, nil), 0, "protocol", 0},
	{"rsv3", false, 100, clientFrame(0x91, nil), 0, "protocol", 0},
	{"control too long", false, 1000, clientFrame(finPing, make([]byte, 126)), 0, "protocol", 0},
	{"control fragmented", false, 100, clientFrame(byte(OpPing), nil), 0, "protocol", 0},
	{"continuation first", false, 100, clientFrame(finCont, []byte("x")), 0, "protocol", 0},
	{"text inside fragments", false, 100, cat(clientFrame(byte(OpText), []byte("x")), clientFrame(finText, []byte("y"))), 0, "protocol", 0},
	{"too big", false, 4, clientFrame(finText, []byte("hello")), 0, "too-big", 0},
	{"too big claimed", false, 100, clientFrameLen(finText, nil, 1<<40), 0, "too-big", 0},
	{"too big in fragments", false, 5, cat(clientFrame(byte(OpText), []byte("abc")), clientFrame(finCont, []byte("def"))), 0, "too-big", 0},
	{"exactly the limit", false, 6, cat(clientFrame(byte(OpText), []byte("abc")), clientFrame(finCont, []byte("def"))), 1, "nil", 0},
	{"continuations only", false, 100, bytes.Repeat(clientFrame(byte(OpContinuation), nil), 2), 0, "protocol", 0},
	{"64-bit top bit", false, 100, []byte{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}, 0, "protocol", 0},
}

func TestScanner(t *testing.T) {
	for _, tt := range scannerCases {
		for _, cuts := range [][]int{nil, repeat(1, len(tt.in)), {3, 5, 7}} {
			t.Run(fmt.Sprintf("%s/%v", tt.name, len(cuts)), func(t *testing.T) {
				res := scanAll(Scanner{MaxMessage: tt.max, Deflate: tt.deflate}, tt.in, cuts)
				if got := errName(res.err); got != tt.err {
					t.Fatalf("error %s (%v), want %s", got, res.err, tt.err)
				}
				if len(res.items) != tt.items || res.rest != tt.rest {
					t.Errorf("items %q rest %d, want %d items rest %d", res.items, res.rest, tt.items, tt.rest)
				}
			})
		}
	}
}

func TestScannerFragmentLimit(t *testing.T) {
	in := clientFrame(byte(OpText), nil)
	for range MaxFragments - 1 {
		in = append(in, clientFrame(byte(OpContinuation), nil)...)
	}
	res := scanAll(Scanner{MaxMessage: 100}, in, nil)
	if res.err != nil || len(res.items) != 0 || res.rest != len(in) {
		t.Fatalf("%d fragments: %v, items %q, rest %d", MaxFragments, res.err, res.items, res.rest)
	}
	res = scanAll(Scanner{MaxMessage: 100}, append(in, clientFrame(finCont, nil)...), nil)
	if !errors.Is(res.err, ErrTooBig) || !strings.Contains(res.err.Error(), "fragments") {
		t.Fatalf("%d fragments: %v, want too big", MaxFragments+1, res.err)
	}
}

func TestScannerControlPayload(t *testing.T) {
	res := scanAll(Scanner{MaxMessage: 10}, clientFrame(finPing, []byte("hello")), nil)
	if len(res.items) != 1 || res.items[0] != `ctl 9 "hello"` {
		t.Fatalf("items = %q", res.items)
	}
}

func repeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// FuzzScanFrames: no input panics the scanner, and how the stream is cut
// into reads never changes what it scans to.
func FuzzScanFrames(f *testing.F) {
	for _, tt := range scannerCases {
		f.Add(tt.in, []byte{1, 2, 3}, tt.deflate, uint16(tt.max))
	}
	f.Fuzz(func(t *testing.T, data, cutBytes []byte, deflate bool, limit uint16) {
		cuts := make([]int, len(cutBytes))
		for i, c := range cutBytes {
			cuts[i] = int(c)
		}
		sc := Scanner{MaxMessage: int64(limit), Deflate: deflate}
		whole := scanAll(sc, data, nil)
		split := scanAll(sc, data, cuts)
		if errName(whole.err) != errName(split.err) || whole.rest != split.rest ||
			fmt.Sprint(whole.items) != fmt.Sprint(split.items) {
			t.Fatalf("whole %q %v rest %d\nsplit %q %v rest %d", whole.items, whole.err, whole.rest,
				split.items, split.err, split.rest)
		}
		if whole.err != nil && errName(whole.err) != "too-big" && errName(whole.err) != "protocol" {
			t.Fatalf("unexpected error %v", whole.err)
		}
	})
}

// appendServerFrame writes the shortest length encoding, FIN set, no
// mask, at each boundary of the three encodings.
func TestAppendServerFrame(t *testing.T) {
	for _, c := range []struct {
		n    int
		head []byte
	}{
		{0, []byte{0x81, 0}},
		{125, []byte{0x81, 125}},
		{126, []byte{0x81, 126, 0, 126}},
		{0xffff, []byte{0x81, 126, 0xff, 0xff}},
		{0x10000, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		p := bytes.Repeat([]byte("j"), c.n)
		got := appendServerFrame([]byte("x"), OpText, p)
		if !bytes.Equal(got[1:1+len(c.head)], c.head) || !bytes.Equal(got[1+len(c.head):], p) {
			t.Fatalf("%d bytes: header % x", c.n, got[1:min(len(got), 11)])
		}
		h, n, err := ParseHeader(got[1:])
		if err != nil || n != len(c.head) || !h.Fin || h.Masked || h.Opcode != OpText || h.Length != uint64(c.n) {
			t.Fatalf("%d bytes: parsed %+v, %d, %v", c.n, h, n, err)
		}
	}
}
