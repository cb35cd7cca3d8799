package wire

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// A read of 2 holding registers at 0x6B from unit 17, and the request of
// the Modbus Application Protocol's example (3 registers), CRC 0x8776
// sent low byte first.
var (
	readReq  = []byte{0x03, 0x00, 0x6B, 0x00, 0x02}
	readRTU  = []byte{0x11, 0x03, 0x00, 0x6B, 0x00, 0x03, 0x76, 0x87}
	readResp = []byte{0x11, 0x03, 0x04, 0x02, 0x2B, 0x00, 0x64}
)

func TestAppendRTU(t *testing.T) {
	got := AppendRTU(nil, 0x11, readReq)
	want := append([]byte{0x11}, readReq...)
	c := CRC(want)
	want = append(want, byte(c), byte(c>>8))
	if !bytes.Equal(got, want) {
		t.Fatalf("frame % x, want % x", got, want)
	}
	if CRC(got) != 0 { // a frame with its CRC appended checks to 0
		t.Fatalf("CRC over the whole frame %#x, want 0", CRC(got))
	}
	if CRC(readRTU) != 0 {
		t.Fatalf("the specification's example frame does not check")
	}
	if CRC([]byte("123456789")) != 0x4B37 { // CRC-16/MODBUS check value
		t.Fatalf("check value %#x", CRC([]byte("123456789")))
	}
}

func TestParseRTU(t *testing.T) {
	good := AppendRTU(nil, 0x11, readResp[1:])
	exc := AppendRTU(nil, 0x11, []byte{0x83, 0x02})
	echo := AppendRTU(nil, 0x11, []byte{0x06, 0x00, 0x01, 0x00, 0x03})
	bad := append([]byte(nil), good...)
	bad[4] ^= 0xFF
	cases := []struct {
		name    string
		in      []byte
		n       int
		pdu     []byte
		wantErr error
	}{
		{"empty", nil, 0, nil, nil},
		{"one byte", good[:1], 0, nil, nil},
		{"header only", good[:3], 0, nil, nil},
		{"cut before CRC", good[:len(good)-1], 0, nil, nil},
		{"read", good, len(good), readResp[1:], nil},
		{"read and more", append(append([]byte{}, good...), 0x11, 0x03), len(good), readResp[1:], nil},
		{"exception is 5 bytes (goburrow #81)", exc, 5, []byte{0x83, 0x02}, nil},
		{"write echo", echo, 8, echo[1:6], nil},
		{"damaged", bad, len(bad), nil, ErrCRC},
		{"unknown function", []byte{0x11, 0x2B, 0, 0}, 0, nil, ErrFunction},
	}
	for _, c := range cases {
		_, pdu, n, err := ParseRTU(c.in)
		if n != c.n || !bytes.Equal(pdu, c.pdu) || !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
			t.Errorf("%s: n %d pdu % x err %v; want %d % x %v", c.name, n, pdu, err, c.n, c.pdu, c.wantErr)
		}
	}
}

func TestCheckResponse(t *testing.T) {
	write := []byte{0x06, 0x00, 0x01, 0x00, 0x03}
	cases := []struct {
		name     string
		req, res []byte
		ok       bool
	}{
		{"read", readReq, readResp[1:], true},
		{"exception", readReq, []byte{0x83, 0x02}, true},
		{"other function", readReq, []byte{0x04, 0x04, 0, 0, 0, 0}, false},
		{"fewer registers (an earlier read's late answer)", readReq, []byte{0x03, 0x02, 0, 0}, false},
		{"write echo", write, write, true},
		{"other write's echo", write, []byte{0x06, 0x00, 0x01, 0x00, 0x04}, false},
		{"short", readReq, []byte{0x03}, false},
	}
	for _, c := range cases {
		if err := CheckResponse(c.req, c.res); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestParseMBAP(t *testing.T) {
	f := AppendMBAP(nil, 0x1234, 7, readReq)
	tid, unit, pdu, n, err := ParseMBAP(f)
	if err != nil || tid != 0x1234 || unit != 7 || n != len(f) || !bytes.Equal(pdu, readReq) {
		t.Fatalf("%#x %d % x %d %v", tid, unit, pdu, n, err)
	}
	for k := range len(f) {
		if _, _, _, n, err := ParseMBAP(f[:k]); n != 0 || err != nil {
			t.Fatalf("cut at %d: n %d err %v", k, n, err)
		}
	}
	if _, _, _, _, err := ParseMBAP([]byte{0, 1, 0, 1, 0, 2, 1, 3}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("protocol id 1: %v", err)
	}
	if _, _, _, _, err := ParseMBAP([]byte{0, 1, 0, 0, 1, 0, 1, 3}); !errors.Is(err, ErrLength) {
		t.Fatalf("length 256: %v", err)
	}
}

func TestTiming(t *testing.T) {
	tm := LineTiming(9600, 11)
	if tm.Char != 11*time.Second/9600 || tm.T35 != tm.Char*7/2 || tm.T15 != tm.Char*3/2 {
		t.Fatalf("9600: %+v", tm)
	}
	if fast := LineTiming(115200, 11); fast.T35 != 1750*time.Microsecond || fast.T15 != 750*time.Microsecond {
		t.Fatalf("115200: %+v", fast)
	}
	// 2 registers: 8 bytes out, 9 back, two gaps, 50 ms margin.
	want := 17*tm.Char + 2*tm.T35 + 50*time.Millisecond
	if got := tm.ResponseTimeout(8, readReq, 50*time.Millisecond); got != want {
		t.Fatalf("timeout %v, want %v", got, want)
	}
}

// FuzzRTU cuts a stream of response frames at any point: whatever the
// bytes, ParseRTU never panics, never claims more than it has, and a frame
// it accepts checks (its CRC over the whole frame is 0).
func FuzzRTU(f *testing.F) {
	f.Add(AppendRTU(nil, 0x11, readResp[1:]), 3)
	f.Add(AppendRTU(nil, 1, []byte{0x83, 0x02}), 2)
	f.Add(readRTU, 1)
	f.Add([]byte{1}, 0)
	f.Fuzz(func(t *testing.T, p []byte, cut int) {
		if cut < 0 || cut > len(p) {
			cut = len(p)
		}
		_, pdu, n, err := ParseRTU(p[:cut])
		if n > cut || (err == nil && n > 0 && (CRC(p[:n]) != 0 || len(pdu) != n-3)) {
			t.Fatalf("n %d of %d, pdu % x, err %v", n, cut, pdu, err)
		}
	})
}

// FuzzMBAP: any bytes, any cut: no panic, never past the input, and a
// frame it accepts re-encodes to the same bytes.
func FuzzMBAP(f *testing.F) {
	f.Add(AppendMBAP(nil, 1, 1, readReq), 4)
	f.Add([]byte{0, 0, 0, 0, 0, 1, 1}, 7)
	f.Fuzz(func(t *testing.T, p []byte, cut int) {
		if cut < 0 || cut > len(p) {
			cut = len(p)
		}
		tid, unit, pdu, n, err := ParseMBAP(p[:cut])
		if err != nil || n == 0 {
			return
		}
		if n > cut || !bytes.Equal(AppendMBAP(nil, tid, unit, pdu), p[:n]) {
			t.Fatalf("n %d of %d does not re-encode", n, cut)
		}
	})
}
