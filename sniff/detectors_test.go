package sniff

import (
	"bytes"
	"testing"
)

// detectorCase is one row of a detector's table.
type detectorCase struct {
	name     string
	in       []byte
	want     Verdict
	wantNeed int
}

func runDetectorCases(t *testing.T, detect func([]byte) (Verdict, int), cases []detectorCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			v, n := detect(tt.in)
			if v != tt.want || n != tt.wantNeed {
				t.Errorf("detect(% x) = %v, %d; want %v, %d", tt.in, v, n, tt.want, tt.wantNeed)
			}
		})
	}
}

var modbusCases = []detectorCase{
	{"mbpoll read", mbpollRead, Match, 0},
	{"write coil", modbusWriteCoil, Match, 0},
	{"device id fc43", modbusDeviceID, Match, 0},
	{"header and fc only", mbpollRead[:8], Match, 0},
	{"write multiple registers", hx("12 34 00 00 00 0b ff 10 00 01 00 02 04 00 0a 01 02"), Match, 0},
	{"empty", nil, NeedMore, 8},
	{"tid only", hx("00 01"), NeedMore, 8},
	{"mbap without fc", mbpollRead[:7], NeedMore, 8},
	{"protocol id high byte", hx("00 01 01"), No, 0},
	{"protocol id low byte", hx("00 01 00 01"), No, 0},
	{"length high byte", hx("00 01 00 00 01"), No, 0},
	{"length 1", hx("00 01 00 00 00 01"), No, 0},
	{"length 255", hx("00 01 00 00 00 ff"), No, 0},
	{"length 2 ok so far", hx("00 01 00 00 00 02"), NeedMore, 8},
	{"exception response", hx("00 01 00 00 00 03 01 83 02"), No, 0},
	{"function code 0", hx("00 01 00 00 00 02 01 00"), No, 0},
	{"function code 0x80", hx("00 01 00 00 00 02 01 80"), No, 0},
	{"function code 0xff", hx("00 01 00 00 00 02 01 ff"), No, 0},
	// Function codes the server does not serve are still Modbus: the
	// handler answers them with exception 01.
	{"function code 0x41", hx("00 07 00 00 00 03 01 41 00"), Match, 0},
	{"function code 9", hx("00 01 00 00 00 02 01 09"), Match, 0},
	{"function code 44", hx("00 01 00 00 00 02 01 2c"), Match, 0},
	{"function code 127", hx("00 01 00 00 00 02 01 7f"), Match, 0},
	{"transaction id e34d", hx("e3 4d 00 00 00 06 01 03 00 00 00 01"), Match, 0},
}

func TestDetectModbus(t *testing.T) {
	runDetectorCases(t, DetectModbus, modbusCases)
	for fc := range 256 {
		frame := append(hx("00 01 00 00 00 02 01"), byte(fc))
		v, _ := DetectModbus(frame)
		if want := fc >= 1 && fc <= 127; (v == Match) != want {
			t.Errorf("function code %d: %v", fc, v)
		}
	}
}

var httpCases = []detectorCase{
	{"curl get", curlGet, Match, 0},
	{"post", []byte("POST /api HTTP/1.1\r\n"), Match, 0},
	{"put", []byte("PUT /x HTTP/1.0\r\n"), Match, 0},
	{"delete", []byte("DELETE /x HTTP/1.1\r\n"), Match, 0},
	{"head", []byte("HEAD / HTTP/1.1\r\n"), Match, 0},
	{"options", []byte("OPTIONS * HTTP/1.1\r\n"), Match, 0},
	{"patch", []byte("PATCH /x HTTP/1.1\r\n"), Match, 0},
	{"connect", []byte("CONNECT gw:443 HTTP/1.1\r\n"), Match, 0},
	{"trace", []byte("TRACE / HTTP/1.1\r\n"), Match, 0},
	{"empty", nil, NeedMore, 4},
	{"G", []byte("G"), NeedMore, 4},
	{"P could be PUT", []byte("P"), NeedMore, 4},
	{"PO", []byte("PO"), NeedMore, 5},
	{"PA", []byte("PA"), NeedMore, 6},
	{"O", []byte("O"), NeedMore, 8},
	{"GET without space", []byte("GET"), NeedMore, 4},
	{"lower case", []byte("get / HTTP/1.1\r\n"), No, 0},
	{"tab after method", []byte("GET\t/"), No, 0},
	{"longer token", []byte("GETS /"), No, 0},
	{"http/2 preface", []byte("PRI * HTTP/2.0\r\n"), No, 0},
	{"binary", hx("00 01 00 00"), No, 0},
}

func TestDetectHTTP(t *testing.T) { runDetectorCases(t, DetectHTTP, httpCases) }

var coapCases = []detectorCase{
	{"libcoap csm", libcoapCSM, Match, 0},
	{"bare csm", bareCSM, Match, 0},
	{"token csm", tokenCSM, Match, 0},
	{"ext length csm", extLenCSM, Match, 0},
	{"len 14 csm", hx("e0 00 00 e1"), Match, 0},
	{"len 15 csm at limit", hx("f0 00 0e fe f3 e1"), Match, 0},
	{"empty", nil, NeedMore, 2},
	{"first byte", hx("40"), NeedMore, 2},
	{"len 13 first byte", hx("d0"), NeedMore, 3},
	{"len 14 partial", hx("e0 00"), NeedMore, 4},
	{"len 15 partial", hx("f0 00 00"), NeedMore, 6},
	{"tkl 9 reserved", hx("09"), No, 0},
	{"tkl 15 reserved", hx("4f e1"), No, 0},
	{"get is not a csm", hx("40 01"), No, 0},
	{"ping is not first", hx("00 e2"), No, 0},
	{"len 15 over 1 MiB", hx("f0 00 0e fe f4 e1"), No, 0},
	{"len 15 over early", hx("f0 01"), No, 0},
	{"len 15 over at 3 bytes", hx("f0 00 0f"), No, 0},
}

func TestDetectCoAPTCP(t *testing.T) { runDetectorCases(t, DetectCoAPTCP, coapCases) }

func corrupt(b []byte, at int) []byte {
	out := bytes.Clone(b)
	out[at] ^= 0x01
	return out
}

var privateCases = []detectorCase{
	{"hello", privateHelloFrame, Match, 0},
	{"pub first", privatePubFirst, Match, 0},
	{"sub first", privateSubFirst, Match, 0},
	{"ping first", privatePingFirst, Match, 0},
	{"bad crc", privateBadCRC, Match, 0},
	{"version 2", privateVersion2, Match, 0},
	{"version 0", hx("e3 4d 00"), Match, 0},
	{"16 MiB hello header", privateHugeHello, Match, 0},
	{"magic only", []byte{Magic0, Magic1}, Match, 0},
	{"empty", nil, NeedMore, 2},
	{"first magic byte", []byte{Magic0}, NeedMore, 2},
	{"bad magic0", []byte{0xE2}, No, 0},
	{"bad magic1", []byte{Magic0, 'G'}, No, 0},
	{"http", curlGet, No, 0},
}

func TestDetectPrivate(t *testing.T) { runDetectorCases(t, DetectPrivate, privateCases) }

var tlsDetectCases = []detectorCase{
	{"tls 1.0 record", hx("16 03 01 00 f1 01"), Match, 0},
	{"ssl 3 record", hx("16 03 00 00 40 01"), Match, 0},
	{"largest record", hx("16 03 03 48 00 01"), Match, 0},
	{"empty", nil, NeedMore, 6},
	{"record header", hx("16 03 01 00 f1"), NeedMore, 6},
	{"alert", hx("15 03 01 00 02"), No, 0},
	{"sslv2 hello", hx("80 2e 01 00 02"), No, 0},
	{"major 2", hx("16 02"), No, 0},
	{"minor 5", hx("16 03 05"), No, 0},
	{"length zero", hx("16 03 01 00 00"), No, 0},
	{"length over early", hx("16 03 01 49"), No, 0},
	{"length over", hx("16 03 01 48 01"), No, 0},
	{"server hello", hx("16 03 03 00 5a 02"), No, 0},
}

func TestDetectTLS(t *testing.T) {
	runDetectorCases(t, DetectTLS, tlsDetectCases)
	hello := captureClientHello(t, "example.com")
	if v, n := DetectTLS(hello); v != Match {
		t.Errorf("DetectTLS(Go ClientHello) = %v, %d", v, n)
	}
}

func TestDetectorsAllocs(t *testing.T) {
	for _, d := range detectors {
		for _, in := range [][]byte{nil, mbpollRead, curlGet, libcoapCSM, privateHelloFrame, hx("16 03 01 00 f1 01")} {
			if n := testing.AllocsPerRun(50, func() { d.detect(in) }); n != 0 {
				t.Errorf("%v detector allocates %v times on % x", d.proto, n, in)
			}
		}
	}
}

func TestHTTPMethodStart(t *testing.T) {
	for _, m := range httpMethods {
		if !httpMethodStart(m[0]) {
			t.Errorf("httpMethodStart(%q) = false for %q", m[0], m)
		}
	}
}
