package sniff

import (
	"bytes"
	"testing"
)

func rudpHeader(n int) []byte {
	b := make([]byte, n)
	b[0], b[1] = RUDPMagic0, RUDPMagic1
	return b
}

// datagramCases is ClassifyDatagram's table; FuzzClassifyDatagram is seeded from it.
var datagramCases = []struct {
	name string
	in   []byte
	want DatagramClass
}{
	{"coap-client get /test", hx("42 01 04 d2 7a 10 b4 74 65 73 74"), DatagramCoAP},
	{"coap get no token", hx("40 01 12 34 b4 74 65 73 74"), DatagramCoAP},
	{"coap ping", hx("40 00 12 34"), DatagramCoAP},
	{"coap reset", hx("70 00 12 34"), DatagramCoAP},
	{"coap put with payload", hx("44 03 00 01 de ad be ef b3 74 61 67 ff 32 31 2e 35"), DatagramCoAP},
	{"coap ack 2.05 with payload", hx("62 45 12 34 aa bb c0 ff 68 69"), DatagramCoAP},
	{"coap 4.04", hx("60 84 12 34"), DatagramCoAP},
	{"coap 5.03", hx("60 a3 12 34"), DatagramCoAP},
	{"coap observe get", hx("41 01 00 07 5a 60 5b 74 65 6d 70 65 72 61 74 75 72 65"), DatagramCoAP},
	{"option delta ext 13", hx("40 01 12 34 d1 02 61"), DatagramCoAP},
	{"option length ext 14", append(hx("40 02 12 34 0e 00 01"), bytes.Repeat([]byte{'a'}, 270)...), DatagramCoAP},
	{"rudp header", rudpHeader(RUDPHeaderLen), DatagramRUDP},
	{"rudp with payload", append(rudpHeader(RUDPHeaderLen), 1, 2, 3), DatagramRUDP},
	{"rudp short", rudpHeader(RUDPHeaderLen - 1), DatagramUnknown},
	{"rudp wrong second magic", append([]byte{0xE3, 0x56}, make([]byte, 14)...), DatagramUnknown},
	{"empty", nil, DatagramUnknown},
	{"coap short header", hx("40 01 12"), DatagramUnknown},
	{"version 0", hx("00 01 12 34"), DatagramUnknown},
	{"version 2", hx("80 01 12 34"), DatagramUnknown},
	{"tkl 9", append(hx("49 01 12 34"), make([]byte, 9)...), DatagramUnknown},
	{"token truncated", hx("48 01 12 34 aa"), DatagramUnknown},
	{"empty with token", hx("41 00 12 34 aa"), DatagramUnknown},
	{"empty with options", hx("40 00 12 34 b4 74 65 73 74"), DatagramUnknown},
	{"class 1", hx("40 20 12 34"), DatagramUnknown},
	{"class 3", hx("40 60 12 34"), DatagramUnknown},
	{"class 6", hx("40 c0 12 34"), DatagramUnknown},
	{"class 7 csm is tcp only", hx("40 e1 12 34"), DatagramUnknown},
	{"payload marker last", hx("60 45 12 34 ff"), DatagramUnknown},
	{"option delta 15", hx("40 01 12 34 f1 00"), DatagramUnknown},
	{"option length 15", hx("40 01 12 34 1f 00"), DatagramUnknown},
	{"option value truncated", hx("40 01 12 34 b4 74 65"), DatagramUnknown},
	{"option ext truncated", hx("40 02 12 34 0e 00"), DatagramUnknown},
	{"dns query", hx("ab cd 01 00 00 01 00 00 00 00 00 00"), DatagramUnknown},
}

func TestClassifyDatagram(t *testing.T) {
	for _, tt := range datagramCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyDatagram(tt.in); got != tt.want {
				t.Errorf("ClassifyDatagram(% x) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestClassifyDatagramAllocs(t *testing.T) {
	for _, tt := range datagramCases {
		if n := testing.AllocsPerRun(50, func() { ClassifyDatagram(tt.in) }); n != 0 {
			t.Errorf("ClassifyDatagram(%s) allocates %v times", tt.name, n)
		}
	}
}

func BenchmarkClassifyDatagram(b *testing.B) {
	cases := []struct {
		name string
		in   []byte
	}{
		{"coap", hx("44 03 00 01 de ad be ef b3 74 61 67 ff 32 31 2e 35")},
		{"rudp", append(rudpHeader(RUDPHeaderLen), make([]byte, 1200)...)},
		{"unknown", hx("ab cd 01 00 00 01 00 00 00 00 00 00")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = ClassifyDatagram(c.in)
			}
		})
	}
}
