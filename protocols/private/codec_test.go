package private

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// must unwraps an encoder result whose inputs the test chose valid.
func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// frameWith builds a frame and then lets mut damage it.
func frameWith(typ Type, payload []byte, mut func([]byte)) []byte {
	f := AppendFrame(nil, typ, payload)
	if mut != nil {
		mut(f)
	}
	return f
}

var parseCases = []struct {
	name    string
	in      []byte
	max     int
	wantN   int
	wantTyp Type
	wantErr error
}{
	{"empty", nil, 0, 0, 0, nil},
	{"ping", frameWith(TypePing, nil, nil), 0, 12, TypePing, nil},
	{"pub", frameWith(TypePub, []byte("0123456789abcdef"), nil), 0, 28, TypePub, nil},
	{"two frames", append(frameWith(TypePong, []byte{1}, nil), frameWith(TypePing, nil, nil)...), 0, 13, TypePong, nil},
	{"partial header", frameWith(TypeAck, []byte{0, 0, 0, 0, 0}, nil)[:7], 0, 0, 0, nil},
	{"partial payload", frameWith(TypeAck, []byte{0, 0, 0, 0, 0}, nil)[:15], 0, 0, 0, nil},
	{"bad magic0 alone", []byte{0x16}, 0, 0, 0, ErrBadMagic},
	{"bad magic1", []byte{Magic0, 'G'}, 0, 0, 0, ErrBadMagic},
	{"http", []byte("GET / HTTP/1.1\r\n\r\n"), 0, 0, 0, ErrBadMagic},
	{"bad version", []byte{Magic0, Magic1, 2}, 0, 0, 0, ErrBadVersion},
	{"type zero", []byte{Magic0, Magic1, Version, 0}, 0, 0, 0, ErrUnknownType},
	{"type ten", []byte{Magic0, Magic1, Version, 10}, 0, 0, 0, ErrUnknownType},
	{"too large header only", []byte{Magic0, Magic1, Version, 2, 0, 1, 0, 1}, 0, 0, 0, ErrFrameTooLarge},
	{"max u32 length", []byte{Magic0, Magic1, Version, 2, 0xff, 0xff, 0xff, 0xff}, 0, 0, 0, ErrFrameTooLarge},
	{"custom limit", frameWith(TypePub, make([]byte, 11), nil), 10, 0, 0, ErrFrameTooLarge},
	{"at limit", frameWith(TypePub, make([]byte, 10), nil), 10, 22, TypePub, nil},
	{"bad crc", frameWith(TypePing, []byte{1, 2}, func(f []byte) { f[11] ^= 1 }), 0, 0, 0, ErrBadCRC},
	{"payload flipped", frameWith(TypePing, []byte{1, 2}, func(f []byte) { f[13] ^= 0x80 }), 0, 0, 0, ErrBadCRC},
}

func TestParseFrame(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			f, n, err := ParseFrame(tc.in, tc.max)
			if !errors.Is(err, tc.wantErr) || n != tc.wantN {
				t.Fatalf("got n=%d err=%v, want n=%d err=%v", n, err, tc.wantN, tc.wantErr)
			}
			if n > 0 && (f.Type != tc.wantTyp || !bytes.Equal(f.Payload, tc.in[HeaderLen:n])) {
				t.Fatalf("frame %v %x", f.Type, f.Payload)
			}
		})
	}
}

// TestParseFrameIncremental feeds every prefix of a frame: each must ask
// for more bytes, and the whole must parse.
func TestParseFrameIncremental(t *testing.T) {
	full := must(AppendPub(nil, Pub{MsgID: 9, Topic: []byte("x/y"), Data: []byte("payload")}))
	for i := range len(full) {
		if _, n, err := ParseFrame(full[:i], 0); n != 0 || err != nil {
			t.Fatalf("prefix %d: n=%d err=%v", i, n, err)
		}
	}
	if _, n, err := ParseFrame(full, 0); n != len(full) || err != nil {
		t.Fatalf("whole: n=%d err=%v", n, err)
	}
}

func TestPayloadAliasesInput(t *testing.T) {
	in := AppendFrame(nil, TypePing, []byte{1, 2, 3})
	f, _, _ := ParseFrame(in, 0)
	in[HeaderLen] = 9
	if f.Payload[0] != 9 || cap(f.Payload) != 3 {
		t.Fatalf("payload %x cap %d", f.Payload, cap(f.Payload))
	}
}

func TestRoundTrip(t *testing.T) {
	hello := Hello{DeviceID: []byte("sensor-ä1"), Keepalive: 60, Flags: 0}
	pub := Pub{MsgID: 1 << 31, Flags: PubRetained, Topic: []byte("plant/1/t"), TS: -5, Src: []byte("modbus"), Data: []byte{0, 1, 2}}
	sub := Sub{MsgID: 42, Filter: []byte("plant/+/#")}
	ack := Ack{MsgID: 7, Status: CodeBadTopic}
	var buf []byte
	buf = must(AppendHello(buf, hello))
	buf = must(AppendPub(buf, pub))
	buf = must(AppendSub(buf, sub))
	buf = must(AppendUnsub(buf, sub))
	buf = AppendAck(buf, ack)
	buf = AppendError(buf, CodeTooManySubs, "limit 64")
	buf = must(AppendPing(buf, []byte("tok")))
	buf = must(AppendPong(buf, nil))
	buf = AppendDropped(buf, 1<<40)

	var frames []Frame
	for len(buf) > 0 {
		f, n, err := ParseFrame(buf, 0)
		if err != nil || n == 0 {
			t.Fatalf("parse: n=%d err=%v", n, err)
		}
		frames = append(frames, f)
		buf = buf[n:]
	}
	wantTypes := []Type{TypeHello, TypePub, TypeSub, TypeUnsub, TypeAck, TypeError, TypePing, TypePong, TypeDropped}
	for i, f := range frames {
		if f.Type != wantTypes[i] {
			t.Fatalf("frame %d: %v want %v", i, f.Type, wantTypes[i])
		}
	}
	if h, err := DecodeHello(frames[0].Payload); err != nil || string(h.DeviceID) != string(hello.DeviceID) || h.Keepalive != 60 {
		t.Fatalf("hello %+v %v", h, err)
	}
	if p, err := DecodePub(frames[1].Payload); err != nil || p.MsgID != pub.MsgID || string(p.Topic) != "plant/1/t" ||
		p.TS != -5 || p.Flags != PubRetained || string(p.Src) != "modbus" || !bytes.Equal(p.Data, pub.Data) {
		t.Fatalf("pub %+v %v", p, err)
	}
	for _, i := range []int{2, 3} {
		if s, err := DecodeSub(frames[i].Payload); err != nil || s.MsgID != 42 || string(s.Filter) != "plant/+/#" {
			t.Fatalf("sub %+v %v", s, err)
		}
	}
	if a, err := DecodeAck(frames[4].Payload); err != nil || a != ack {
		t.Fatalf("ack %+v %v", a, err)
	}
	if e, err := DecodeError(frames[5].Payload); err != nil || e.Code != CodeTooManySubs || string(e.Text) != "limit 64" {
		t.Fatalf("error %+v %v", e, err)
	}
	if tok, err := DecodePing(frames[6].Payload); err != nil || string(tok) != "tok" {
		t.Fatalf("ping %q %v", tok, err)
	}
	if n, err := DecodeDropped(frames[8].Payload); err != nil || n != 1<<40 {
		t.Fatalf("dropped %d %v", n, err)
	}
}

// decodeCases are payloads for the decoders; they also seed the fuzzers.
var decodeCases = []struct {
	name string
	typ  Type
	p    []byte
	ok   bool
}{
	{"hello ok", TypeHello, []byte{0, 2, 'i', 'd', 0, 30, 0}, true},
	{"hello empty id", TypeHello, []byte{0, 0, 0, 30, 0}, false},
	{"hello short", TypeHello, []byte{0, 2, 'i', 'd', 0}, false},
	{"hello trailing", TypeHello, []byte{0, 2, 'i', 'd', 0, 30, 0, 0}, false},
	{"hello id too long", TypeHello, append(append([]byte{0, 129}, bytes.Repeat([]byte{'a'}, 129)...), 0, 0, 0), false},
	{"hello control char", TypeHello, []byte{0, 2, 'i', '\n', 0, 30, 0}, false},
	{"hello bad utf8", TypeHello, []byte{0, 2, 'i', 0xff, 0, 30, 0}, false},
	{"hello id overruns", TypeHello, []byte{0xff, 0xff, 'i'}, false},
	{"pub ok", TypePub, []byte{0, 0, 0, 1, 0, 0, 1, 't', 0, 0, 0, 0, 0, 0, 0, 0, 0, 'd'}, true},
	{"pub no data", TypePub, []byte{0, 0, 0, 1, 0, 0, 1, 't', 0, 0, 0, 0, 0, 0, 0, 0, 0}, true},
	{"pub with src", TypePub, []byte{0, 0, 0, 0, 0, 0, 1, 't', 0, 0, 0, 0, 0, 0, 0, 1, 2, 'm', 'b'}, true},
	{"pub src overruns", TypePub, []byte{0, 0, 0, 0, 0, 0, 1, 't', 0, 0, 0, 0, 0, 0, 0, 1, 9, 'm'}, false},
	{"pub no ts", TypePub, []byte{0, 0, 0, 1, 0, 0, 1, 't'}, false},
	{"pub topic overruns", TypePub, []byte{0, 0, 0, 1, 0, 0, 9, 't'}, false},
	{"pub empty", TypePub, nil, false},
	{"pub retained", TypePub, []byte{0, 0, 0, 0, PubRetained, 0, 1, 't', 0, 0, 0, 0, 0, 0, 0, 0, 0}, true},
	{"sub ok", TypeSub, []byte{0, 0, 0, 5, 0, 3, 'a', '/', '#'}, true},
	{"unsub ok", TypeUnsub, []byte{0, 0, 0, 0, 0, 1, '+'}, true},
	{"sub trailing", TypeSub, []byte{0, 0, 0, 5, 0, 1, 'a', 'b'}, false},
	{"sub short", TypeSub, []byte{0, 0, 0, 5, 0}, false},
	{"ack ok", TypeAck, []byte{0, 0, 0, 5, 17}, true},
	{"ack short", TypeAck, []byte{0, 0, 0, 5}, false},
	{"ack long", TypeAck, []byte{0, 0, 0, 5, 0, 0}, false},
	{"error ok", TypeError, []byte{0, 17, 0, 2, 'n', 'o'}, true},
	{"error no text", TypeError, []byte{0, 32, 0, 0}, true},
	{"error text overruns", TypeError, []byte{0, 17, 0, 3, 'n', 'o'}, false},
	{"error text too long", TypeError, append([]byte{0, 1, 1, 1}, make([]byte, 257)...), false},
	{"ping empty", TypePing, nil, true},
	{"ping token", TypePing, []byte("12345678"), true},
	{"ping too long", TypePing, []byte("123456789"), false},
	{"pong token", TypePong, []byte("1"), true},
	{"dropped ok", TypeDropped, []byte{0, 0, 0, 0, 0, 0, 1, 0}, true},
	{"dropped short", TypeDropped, []byte{0, 0, 0, 1}, false},
	{"dropped long", TypeDropped, make([]byte, 9), false},
}

// decodeAndReencode decodes p as typ and, when it decodes, encodes the
// result again; a correct codec gives back the same payload.
func decodeAndReencode(typ Type, p []byte) (again []byte, err error) {
	var frame []byte
	switch typ {
	case TypeHello:
		var h Hello
		if h, err = DecodeHello(p); err == nil {
			frame, err = AppendHello(nil, h)
		}
	case TypePub:
		var m Pub
		if m, err = DecodePub(p); err == nil {
			frame, err = AppendPub(nil, m)
		}
	case TypeSub, TypeUnsub:
		var s Sub
		if s, err = DecodeSub(p); err == nil {
			frame, err = appendFilter(nil, typ, s)
		}
	case TypeAck:
		var a Ack
		if a, err = DecodeAck(p); err == nil {
			frame = AppendAck(nil, a)
		}
	case TypeError:
		var e ErrorMsg
		if e, err = DecodeError(p); err == nil {
			frame = AppendError(nil, e.Code, string(e.Text))
		}
	case TypeDropped:
		var n uint64
		if n, err = DecodeDropped(p); err == nil {
			frame = AppendDropped(nil, n)
		}
	case TypePing, TypePong:
		var tok []byte
		if tok, err = DecodePing(p); err == nil {
			frame, err = appendToken(nil, typ, tok)
		}
	}
	if err != nil {
		return nil, err
	}
	return frame[HeaderLen:], nil
}

func TestDecoders(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			again, err := decodeAndReencode(tc.typ, tc.p)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v does not wrap ErrMalformed", err)
			}
			if err == nil && !bytes.Equal(again, tc.p) {
				t.Fatalf("re-encoded %x, want %x", again, tc.p)
			}
		})
	}
}

func TestEncoderLimits(t *testing.T) {
	long := make([]byte, maxU16+1)
	cases := []struct {
		name string
		run  func() ([]byte, error)
		want error
	}{
		{"hello empty id", func() ([]byte, error) { return AppendHello(nil, Hello{}) }, ErrMalformed},
		{"hello long id", func() ([]byte, error) { return AppendHello(nil, Hello{DeviceID: long[:MaxDeviceID+1]}) }, ErrMalformed},
		{"pub long topic", func() ([]byte, error) { return AppendPub(nil, Pub{Topic: long}) }, ErrFieldTooLong},
		{"pub long src", func() ([]byte, error) { return AppendPub(nil, Pub{Topic: []byte("t"), Src: long[:256]}) }, ErrFieldTooLong},
		{"sub long filter", func() ([]byte, error) { return AppendSub(nil, Sub{Filter: long}) }, ErrFieldTooLong},
		{"ping long token", func() ([]byte, error) { return AppendPing(nil, long[:9]) }, ErrFieldTooLong},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.run()
			if !errors.Is(err, tc.want) || len(b) != 0 {
				t.Fatalf("got %d bytes, err %v; want %v", len(b), err, tc.want)
			}
		})
	}
}

func TestAppendErrorTruncates(t *testing.T) {
	text := strings.Repeat("ä", MaxErrorText) // 2 bytes a rune: cut must land between runes
	f, _, err := ParseFrame(AppendError(nil, CodeInternal, text), 0)
	if err != nil {
		t.Fatal(err)
	}
	e, err := DecodeError(f.Payload)
	if err != nil || len(e.Text) != MaxErrorText || !strings.HasPrefix(text, string(e.Text)) {
		t.Fatalf("text %d bytes, err %v", len(e.Text), err)
	}
	a, _, _ := ParseFrame(AppendAck(nil, Ack{Status: 300}), 0)
	if got, _ := DecodeAck(a.Payload); got.Status != CodeInternal {
		t.Fatalf("oversized status sent as %d", got.Status)
	}
}

func TestCodes(t *testing.T) {
	cases := []struct {
		err       error
		code      Code
		fatal     bool
		violation bool
	}{
		{nil, CodeOK, false, false},
		{ErrBadMagic, CodeMalformed, true, true},
		{ErrMalformed, CodeMalformed, true, true},
		{ErrBadCRC, CodeBadCRC, true, true},
		{ErrBadVersion, CodeBadVersion, true, true},
		{ErrFrameTooLarge, CodeFrameTooLarge, true, true},
		{ErrUnknownType, CodeUnknownType, true, true},
		{CodeHelloTwice, CodeHelloTwice, true, true},
		{CodeBadTopic, CodeBadTopic, false, false},
		{CodeBusy, CodeBusy, false, false},
		{CodeSlowConsumer, CodeSlowConsumer, true, false},
		{errors.New("x"), CodeInternal, false, false},
	}
	for _, tc := range cases {
		c := CodeOf(tc.err)
		if c != tc.code || c.Fatal() != tc.fatal || c.Violation() != tc.violation {
			t.Errorf("%v: code %d fatal %v violation %v", tc.err, c, c.Fatal(), c.Violation())
		}
		if c.Text() == "unknown code" || !strings.HasPrefix(c.Error(), "private: ") {
			t.Errorf("code %d has no text: %q", c, c.Error())
		}
	}
	if Code(999).Text() != "unknown code" || Type(0).String() != "UNKNOWN" || TypePub.String() != "PUB" {
		t.Error("names of unknown values")
	}
}

// TestSpecExamples checks the hex examples of SPEC.md against the encoder.
func TestSpecExamples(t *testing.T) {
	spec, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(spec)), "")
	examples := [][]byte{
		must(AppendHello(nil, Hello{DeviceID: []byte("dev1"), Keepalive: 30})),
		AppendAck(nil, Ack{}),
		must(AppendPub(nil, Pub{MsgID: 7, Topic: []byte("a/b"), Data: []byte("hi")})),
		must(AppendSub(nil, Sub{MsgID: 1, Filter: []byte("a/#")})),
		AppendError(nil, CodeBadTopic, "bad topic"),
		AppendAck(nil, Ack{MsgID: 7, Status: CodeCacheFull}),
		AppendDropped(nil, 42),
	}
	for _, ex := range examples {
		if !strings.Contains(flat, hex.EncodeToString(ex)) {
			t.Errorf("SPEC.md lacks example %x", ex)
		}
	}
	if got := mustHex(t, "e3 4d 01 05 00 00 00 00"); !bytes.Equal(got, AppendFrame(nil, TypePing, nil)[:8]) {
		t.Errorf("header layout %x", got)
	}
}

func TestParseAllocs(t *testing.T) {
	in := must(AppendPub(nil, Pub{MsgID: 1, Topic: []byte("a/b/c"), Data: make([]byte, 100)}))
	dst := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		f, _, _ := ParseFrame(in, 0)
		_, _ = DecodePub(f.Payload)
		dst = AppendFrame(dst[:0], TypePing, nil)
		dst, _ = appendPub(dst[:0], pubHead{ts: 1}, "a/b/c", "modbus", f.Payload)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per parse+encode, want 0", allocs)
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.in, tc.max)
	}
	f.Fuzz(func(t *testing.T, in []byte, maxPayload int) {
		fr, n, err := ParseFrame(in, maxPayload)
		if err != nil || n == 0 {
			if n != 0 {
				t.Fatalf("n=%d with err %v", n, err)
			}
			return
		}
		if n > len(in) || !fr.Type.Valid() {
			t.Fatalf("n=%d of %d, type %d", n, len(in), fr.Type)
		}
		if again := AppendFrame(nil, fr.Type, fr.Payload); !bytes.Equal(again, in[:n]) {
			t.Fatalf("re-encoded %x, want %x", again, in[:n])
		}
	})
}

// fuzzDecoder checks that a decoder never panics and that whatever it
// accepts encodes back to the same bytes.
func fuzzDecoder(f *testing.F, types ...Type) {
	for _, tc := range decodeCases {
		for _, typ := range types {
			if tc.typ == typ {
				f.Add(tc.p)
			}
		}
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		for _, typ := range types {
			again, err := decodeAndReencode(typ, p)
			if err == nil && !bytes.Equal(again, p) {
				t.Fatalf("%v: re-encoded %x, want %x", typ, again, p)
			}
		}
	})
}

func FuzzDecodeHello(f *testing.F)   { fuzzDecoder(f, TypeHello) }
func FuzzDecodePub(f *testing.F)     { fuzzDecoder(f, TypePub) }
func FuzzDecodeSub(f *testing.F)     { fuzzDecoder(f, TypeSub, TypeUnsub) }
func FuzzDecodeAck(f *testing.F)     { fuzzDecoder(f, TypeAck) }
func FuzzDecodeError(f *testing.F)   { fuzzDecoder(f, TypeError) }
func FuzzDecodePing(f *testing.F)    { fuzzDecoder(f, TypePing, TypePong) }
func FuzzDecodeDropped(f *testing.F) { fuzzDecoder(f, TypeDropped) }

func BenchmarkParseFrame(b *testing.B) {
	in := must(AppendPub(nil, Pub{MsgID: 1, Topic: []byte("plant/1/temp"), Data: make([]byte, 64)}))
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		f, _, err := ParseFrame(in, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodePub(f.Payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendFrame(b *testing.B) {
	payload := make([]byte, 64)
	dst := make([]byte, 0, 128)
	b.ReportAllocs()
	b.SetBytes(int64(HeaderLen + len(payload)))
	for b.Loop() {
		dst = AppendFrame(dst[:0], TypePub, payload)
	}
}

func BenchmarkAppendDelivery(b *testing.B) {
	payload := make([]byte, 64)
	dst := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = appendPub(dst[:0], pubHead{ts: 1700000000}, "plant/1/temp", "modbus", payload)
	}
}
