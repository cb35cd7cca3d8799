package sniff

import (
	"fmt"
	"testing"
)

func TestProtoString(t *testing.T) {
	tests := []struct {
		proto Proto
		want  string
	}{
		{Unknown, "unknown"}, {Modbus, "modbus"}, {HTTP, "http"}, {CoAP, "coap"},
		{Private, "private"}, {TLS, "tls"}, {Proto(200), "invalid"},
	}
	for _, tt := range tests {
		if got := tt.proto.String(); got != tt.want {
			t.Errorf("Proto(%d).String() = %q, want %q", tt.proto, got, tt.want)
		}
	}
}

func TestParseProto(t *testing.T) {
	tests := []struct {
		in     string
		want   Proto
		wantOK bool
	}{
		{"modbus", Modbus, true}, {"HTTP", HTTP, true}, {"CoAP", CoAP, true},
		{"private", Private, true}, {"tls", TLS, true}, {"unknown", Unknown, true},
		{"", Unknown, false}, {"mqtt", Unknown, false}, {"*", Unknown, false},
	}
	for _, tt := range tests {
		got, ok := ParseProto(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseProto(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
	for p := Unknown; p <= TLS; p++ {
		if got, ok := ParseProto(p.String()); !ok || got != p {
			t.Errorf("ParseProto(%v.String()) = %v, %v", p, got, ok)
		}
	}
}

func TestVerdictAndClassString(t *testing.T) {
	for v, want := range map[Verdict]string{No: "no", NeedMore: "need-more", Match: "match", 9: "invalid"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", v, got, want)
		}
	}
	for c, want := range map[DatagramClass]string{
		DatagramUnknown: "unknown", DatagramCoAP: "coap", DatagramRUDP: "rudp", 9: "invalid",
	} {
		if got := c.String(); got != want {
			t.Errorf("DatagramClass(%d).String() = %q, want %q", c, got, want)
		}
	}
}

// detectCases is the Detect table; FuzzDetect is seeded from it.
var detectCases = []struct {
	name string
	in   []byte
	want Result
}{
	{"empty", nil, Result{Verdict: NeedMore, Need: 2}},
	{"mbpoll read", mbpollRead, Result{Proto: Modbus, Verdict: Match}},
	{"modbus write coil", modbusWriteCoil, Result{Proto: Modbus, Verdict: Match}},
	{"modbus device id", modbusDeviceID, Result{Proto: Modbus, Verdict: Match}},
	{"modbus tid 00e1 beats coap", modbusTIDLikeCSM, Result{Proto: Modbus, Verdict: Match}},
	{"modbus header only", mbpollRead[:7], Result{Verdict: NeedMore, Need: 8}},
	{"modbus exception is no", hx("00 01 00 00 00 03 01 83 02"), Result{Verdict: No}},
	{"curl get", curlGet, Result{Proto: HTTP, Verdict: Match}},
	{"websocket is http", browserUpgrade, Result{Proto: HTTP, Verdict: Match}},
	{"http method only", []byte("OPTIONS "), Result{Proto: HTTP, Verdict: Match}},
	{"http prefix", []byte("DEL"), Result{Verdict: NeedMore, Need: 7}},
	{"http/2 preface", []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Result{Verdict: No}},
	{"libcoap csm", libcoapCSM, Result{Proto: CoAP, Verdict: Match}},
	{"token csm", tokenCSM, Result{Proto: CoAP, Verdict: Match}},
	{"ext length csm", extLenCSM, Result{Proto: CoAP, Verdict: Match}},
	{"bare csm waits for modbus", bareCSM, Result{Verdict: NeedMore, Need: 8}},
	{"bare csm then request", append(hx("00 e1"), hx("41 01 7a b4 74 65 73 74")...), Result{Proto: CoAP, Verdict: Match}},
	{"bare csm then ping", hx("00 e1 00 e2"), Result{Proto: CoAP, Verdict: Match}},
	{"coap get first is no", hx("40 01 b4 74 65 73 74"), Result{Verdict: No}},
	{"private hello", privateHelloFrame, Result{Proto: Private, Verdict: Match}},
	{"private pub first", privatePubFirst, Result{Proto: Private, Verdict: Match}},
	{"private sub first", privateSubFirst, Result{Proto: Private, Verdict: Match}},
	{"private ping first", privatePingFirst, Result{Proto: Private, Verdict: Match}},
	{"private bad crc", privateBadCRC, Result{Proto: Private, Verdict: Match}},
	{"private version 2", privateVersion2, Result{Proto: Private, Verdict: Match}},
	{"private 16 MiB hello", privateHugeHello, Result{Proto: Private, Verdict: Match}},
	{"private version 0 not modbus", hx("e3 4d 00 00 00 01"), Result{Proto: Private, Verdict: Match}},
	{"private magic waits for modbus", []byte{Magic0, Magic1}, Result{Verdict: NeedMore, Need: 4}}, // CoAP could still match at 4
	{"private version byte decides", []byte{Magic0, Magic1, privateVersion}, Result{Proto: Private, Verdict: Match}},
	{"modbus tid e34d beats private", hx("e3 4d 00 00 00 06 01 03 00 00 00 01"), Result{Proto: Modbus, Verdict: Match}},
	{"modbus unserved fc 0x41", hx("00 07 00 00 00 03 01 41 00"), Result{Proto: Modbus, Verdict: Match}},
	{"modbus unserved fc 9", hx("00 08 00 00 00 02 01 09"), Result{Proto: Modbus, Verdict: Match}},
	{"tls first bytes", hx("16 03 01 02 00 01"), Result{Proto: TLS, Verdict: Match}},
	{"tls application data", hx("17 03 03 00 20 00"), Result{Verdict: No}},
	{"ssh banner", []byte("SSH-2.0-OpenSSH_9.6\r\n"), Result{Verdict: No}},
	{"telnet junk", hx("ff fd 18 ff fd 20"), Result{Verdict: No}},
	{"zeros", make([]byte, 16), Result{Verdict: No}},
}

func TestDetect(t *testing.T) {
	for _, tt := range detectCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := Detect(tt.in); got != tt.want {
				t.Errorf("Detect(% x) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDetectTLSCaptured(t *testing.T) {
	hello := captureClientHello(t, "plc.example.com")
	if got := Detect(hello); got != (Result{Proto: TLS, Verdict: Match}) {
		t.Errorf("Detect(Go ClientHello) = %+v", got)
	}
}

// validMessages are complete first messages and the protocol each is.
func validMessages(tb testing.TB) []struct {
	proto Proto
	msg   []byte
} {
	return []struct {
		proto Proto
		msg   []byte
	}{
		{Modbus, mbpollRead}, {Modbus, modbusWriteCoil}, {Modbus, modbusDeviceID}, {Modbus, modbusTIDLikeCSM},
		{HTTP, curlGet}, {HTTP, browserUpgrade}, {HTTP, firefoxUpgrade},
		{CoAP, libcoapCSM}, {CoAP, tokenCSM}, {CoAP, extLenCSM},
		{Private, privateHelloFrame}, {Private, privatePubFirst}, {Private, privateSubFirst},
		{Private, privatePingFirst}, {Private, privateBadCRC}, {Private, privateVersion2}, {Private, privateHugeHello},
		{TLS, captureClientHello(tb, "example.com")},
	}
}

// TestDetectTruncation checks that no prefix of a valid message is ever
// refused, by its own detector or by Detect, and that Detect never names
// another protocol on the way.
func TestDetectTruncation(t *testing.T) {
	for _, m := range validMessages(t) {
		t.Run(fmt.Sprintf("%v/% x", m.proto, m.msg[:min(8, len(m.msg))]), func(t *testing.T) {
			detect := detectorFor(m.proto)
			for i := 0; i <= len(m.msg); i++ {
				prefix := m.msg[:i]
				if v, n := detect(prefix); v == No || v == NeedMore && n <= i {
					t.Fatalf("detector on %d-byte prefix = %v, %d", i, v, n)
				}
				got := Detect(prefix)
				if got.Verdict == No || got.Verdict == Match && got.Proto != m.proto {
					t.Fatalf("Detect on %d-byte prefix = %+v", i, got)
				}
			}
			if got := Detect(m.msg); got != (Result{Proto: m.proto, Verdict: Match}) {
				t.Errorf("Detect(whole) = %+v", got)
			}
		})
	}
}

// TestDetectorsDisjoint checks that each valid message is refused by every
// detector but its own, except the documented Modbus/CoAP overlap.
func TestDetectorsDisjoint(t *testing.T) {
	for _, m := range validMessages(t) {
		for _, d := range detectors {
			if d.proto == m.proto {
				continue
			}
			v, _ := d.detect(m.msg)
			overlap := d.proto == CoAP && m.proto == Modbus && m.msg[0] == 0 && m.msg[1] == coapCSM
			if v == Match && !overlap || v == NeedMore {
				t.Errorf("%v detector on %v message % x = %v", d.proto, m.proto, m.msg[:8], v)
			}
		}
	}
}

func detectorFor(p Proto) func([]byte) (Verdict, int) {
	for _, d := range detectors {
		if d.proto == p {
			return d.detect
		}
	}
	return nil
}

func TestDetectAllocs(t *testing.T) {
	inputs := [][]byte{
		nil, mbpollRead, curlGet, libcoapCSM, privateHelloFrame, privateHugeHello,
		captureClientHello(t, "example.com"), []byte("SSH-2.0-x\r\n"), bareCSM,
	}
	for _, in := range inputs {
		if n := testing.AllocsPerRun(100, func() { _ = Detect(in) }); n != 0 {
			t.Errorf("Detect(% x...) allocates %v times", in[:min(6, len(in))], n)
		}
	}
}

func BenchmarkDetect(b *testing.B) {
	cases := []struct {
		name string
		in   []byte
	}{
		{"modbus", mbpollRead}, {"http", curlGet}, {"coap", libcoapCSM},
		{"private", privateHelloFrame}, {"private-large", privateHugeHello},
		{"tls", captureClientHello(b, "example.com")},
		{"unknown", []byte("SSH-2.0-OpenSSH_9.6\r\n")}, {"needmore", bareCSM},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Detect(c.in)
			}
		})
	}
}

// TestDetectExpired: at the sniff deadline a bare CSM, which Modbus could
// still have claimed with more bytes, is CoAP; what is still undecided
// otherwise stays so, and what Detect decides is unchanged.
func TestDetectExpired(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []byte
		want Result
	}{
		{"bare CSM", []byte{0x00, 0xe1}, Result{Proto: CoAP, Verdict: Match}},
		{"CSM with options", libcoapCSM, Result{Proto: CoAP, Verdict: Match}},
		{"half a Modbus header", []byte{0x00, 0x01, 0x00}, Detect([]byte{0x00, 0x01, 0x00})},
		{"HTTP", []byte("GET / HTTP/1.1\r\n"), Result{Proto: HTTP, Verdict: Match}},
		{"nothing known", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Result{Verdict: No}},
	} {
		if got := DetectExpired(tt.in); got != tt.want {
			t.Errorf("%s: DetectExpired = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := Detect([]byte{0x00, 0xe1}); got.Verdict != NeedMore {
		t.Errorf("Detect of a bare CSM = %+v: the deadline should still decide it", got)
	}
}
