package sniff

import (
	"errors"
	"testing"
)

// fuzzMax bounds the inputs the prefix-walking checks look at, so one
// fuzz iteration stays quadratic in a small number.
const fuzzMax = 2048

func FuzzDetect(f *testing.F) {
	for _, tt := range detectCases {
		f.Add(tt.in)
	}
	for _, m := range validMessages(f) {
		f.Add(m.msg)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzMax {
			data = data[:fuzzMax]
		}
		checkResult(t, data, Detect(data))
		checkFirstContact(t, data, Detect(data))
		for _, d := range detectors {
			checkDetectorMonotone(t, d, data)
		}
		checkDetectMonotone(t, data)
	})
}

// checkResult checks the shape of one Detect result.
func checkResult(t *testing.T, data []byte, r Result) {
	t.Helper()
	switch r.Verdict {
	case Match:
		if r.Proto == Unknown || r.Need != 0 {
			t.Fatalf("Detect(% x) = %+v: a match names a protocol and needs nothing", data, r)
		}
	case NeedMore:
		if r.Proto != Unknown || r.Need <= len(data) {
			t.Fatalf("Detect(% x) = %+v: need must exceed the %d bytes given", data, r, len(data))
		}
		if r.Need > maxNeed {
			t.Fatalf("Detect(% x) = %+v: needs more than maxNeed (%d)", data, r, maxNeed)
		}
	case No:
		if r != (Result{Verdict: No}) {
			t.Fatalf("Detect(% x) = %+v", data, r)
		}
	default:
		t.Fatalf("Detect(% x) = %+v: bad verdict", data, r)
	}
}

// checkFirstContact checks that first frames reach the handler that owes
// them an answer: any well-formed MBAP header with a function code of
// 1..127 is Modbus, and anything else that starts with the private magic
// is private.
func checkFirstContact(t *testing.T, data []byte, r Result) {
	t.Helper()
	mbap := len(data) >= 8 && data[2] == 0 && data[3] == 0 && data[4] == 0 &&
		data[5] >= 2 && data[5] <= 254 && data[7] >= 1 && data[7] <= 127
	switch {
	case mbap && r != (Result{Proto: Modbus, Verdict: Match}):
		t.Fatalf("Detect(% x) = %+v: a well-formed MBAP header is Modbus", data, r)
	case !mbap && len(data) >= 8 && data[0] == Magic0 && data[1] == Magic1 && r != (Result{Proto: Private, Verdict: Match}):
		t.Fatalf("Detect(% x) = %+v: the private magic is private", data, r)
	}
}

// checkDetectorMonotone walks the prefixes of data through one detector:
// Match and No are final, and nothing matches below a need it announced.
func checkDetectorMonotone(t *testing.T, d detector, data []byte) {
	t.Helper()
	final, noMatchBelow := NeedMore, 0
	for i := 0; i <= len(data); i++ {
		v, n := d.detect(data[:i])
		switch {
		case final != NeedMore && v != final:
			t.Fatalf("%v on % x: %v at %d bytes after %v", d.proto, data, v, i, final)
		case v == Match && i < noMatchBelow:
			t.Fatalf("%v on % x: match at %d bytes, below an announced need of %d", d.proto, data, i, noMatchBelow)
		case v == NeedMore && n <= i:
			t.Fatalf("%v on % x: need %d at %d bytes", d.proto, data, n, i)
		case v == NeedMore:
			noMatchBelow = max(noMatchBelow, n)
		case v == Match || v == No:
			final = v
		}
	}
}

// checkDetectMonotone checks Detect's own Match and No are final too:
// once the deciding detector has spoken, more bytes change nothing.
func checkDetectMonotone(t *testing.T, data []byte) {
	t.Helper()
	whole := Detect(data)
	for i := range len(data) {
		r := Detect(data[:i])
		if r.Verdict != NeedMore && r != whole {
			t.Fatalf("Detect(% x) = %+v but its %d-byte prefix gave %+v", data, whole, i, r)
		}
	}
}

func FuzzClassifyDatagram(f *testing.F) {
	for _, tt := range datagramCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := ClassifyDatagram(data)
		switch c {
		case DatagramRUDP:
			if len(data) < RUDPHeaderLen || data[0] != RUDPMagic0 || data[1] != RUDPMagic1 {
				t.Fatalf("% x classified rudp", data)
			}
		case DatagramCoAP:
			if len(data) < coapUDPHeaderLen || data[0]>>6 != 1 || int(data[0]&0x0f) > coapMaxTKL ||
				data[len(data)-1] == 0xFF && len(data) == coapUDPHeaderLen+int(data[0]&0x0f)+1 {
				t.Fatalf("% x classified coap", data)
			}
		case DatagramUnknown:
		default:
			t.Fatalf("% x: bad class %d", data, c)
		}
	})
}

func FuzzTLSServerName(f *testing.F) {
	for _, tt := range tlsCases {
		f.Add(tt.in)
	}
	hello := captureClientHello(f, "example.com")
	f.Add(hello)
	f.Add(refragment(hello, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		name, need, err := TLSServerName(data)
		switch {
		case err != nil:
			if name != "" || need != 0 {
				t.Fatalf("error %v with name %q need %d", err, name, need)
			}
			if !errors.Is(err, ErrNotClientHello) && !errors.Is(err, ErrMalformedHello) && !errors.Is(err, ErrHelloTooLarge) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
		case need > 0:
			if name != "" || need <= len(data) {
				t.Fatalf("need %d for %d bytes, name %q", need, len(data), name)
			}
		default:
			if len(name) > tlsMaxServerNameLen {
				t.Fatalf("name of %d bytes", len(name))
			}
			for i := range len(name) {
				if c := name[i]; !hostNameByte(c) || 'A' <= c && c <= 'Z' {
					t.Fatalf("name %q has byte %#x", name, c)
				}
			}
		}
	})
}

func FuzzHTTPUpgrade(f *testing.F) {
	for _, tt := range upgradeCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, need := HTTPUpgrade(data)
		if ws && need {
			t.Fatal("websocket while still needing the header block")
		}
		if ws && string(data[:4]) != "GET " {
			t.Fatalf("websocket for %q", data)
		}
		// Bytes after a complete header block change nothing.
		if !need {
			ws2, need2 := HTTPUpgrade(append(data[:len(data):len(data)], "Connection: upgrade\r\n\r\n"...))
			if ws2 != ws || need2 {
				t.Fatalf("%q: appending changed %v to %v, %v", data, ws, ws2, need2)
			}
		}
	})
}
