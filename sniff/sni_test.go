package sniff

import (
	"bytes"
	"errors"
	"testing"
)

func TestTLSServerNameCaptured(t *testing.T) {
	tests := []struct {
		serverName string
		want       string
	}{
		{"example.com", "example.com"},
		{"PLC-7.Plant.Example", "plc-7.plant.example"},
		{"a.very.long.subdomain.name.of.the.gateway.example.org", "a.very.long.subdomain.name.of.the.gateway.example.org"},
		{"192.0.2.10", ""}, // Go sends no SNI for an IP address
	}
	for _, tt := range tests {
		t.Run(tt.serverName, func(t *testing.T) {
			hello := captureClientHello(t, tt.serverName)
			for _, in := range [][]byte{hello, refragment(hello, 100), refragment(hello, 1)} {
				name, need, err := TLSServerName(in)
				if name != tt.want || need != 0 || err != nil {
					t.Errorf("TLSServerName = %q, %d, %v; want %q", name, need, err, tt.want)
				}
			}
		})
	}
}

// TestTLSServerNameTruncated feeds every prefix of single- and
// multi-record ClientHellos: each must ask for more, never fail, and ask
// for no more than the whole.
func TestTLSServerNameTruncated(t *testing.T) {
	hello := captureClientHello(t, "example.com")
	for _, whole := range [][]byte{hello, refragment(hello, 97), refragment(hello, 2)} {
		for i := range len(whole) {
			name, need, err := TLSServerName(whole[:i])
			if err != nil || name != "" || need <= i || need > len(whole) {
				t.Fatalf("prefix %d of %d: %q, %d, %v", i, len(whole), name, need, err)
			}
		}
		if name, _, err := TLSServerName(whole); name != "example.com" || err != nil {
			t.Errorf("whole: %q, %v", name, err)
		}
	}
}

// tlsCases is the hand-built table; FuzzTLSServerName is seeded from it.
var tlsCases = []struct {
	name    string
	in      []byte
	want    string
	wantErr error
}{
	{"sni", clientHelloRecord(extension(0, sniData("gw.example"))), "gw.example", nil},
	{"sni trailing dot", clientHelloRecord(extension(0, sniData("gw.example."))), "gw.example", nil},
	{"sni after other extensions", clientHelloRecord(append(extension(10, []byte{0, 2, 0, 29}), extension(0, sniData("b.example"))...)), "b.example", nil},
	{"no sni", clientHelloRecord(extension(10, []byte{0, 2, 0, 29})), "", nil},
	{"empty extensions", clientHelloRecord([]byte{}), "", nil},
	{"no extensions field", clientHelloRecord(nil), "", nil},
	{"unknown name type skipped", clientHelloRecord(extension(0, []byte{0, 4, 7, 0, 1, 'x'})), "", nil},
	{"application data", []byte{0x17, 3, 3, 0, 1, 0}, "", ErrNotClientHello},
	{"server hello", append([]byte{0x16, 3, 3, 0, 4}, 2, 0, 0, 0), "", ErrNotClientHello},
	{"record length zero", []byte{0x16, 3, 1, 0, 0}, "", ErrMalformedHello},
	{"record too long", []byte{0x16, 3, 1, 0x48, 0x01}, "", ErrMalformedHello},
	{"hello too large", []byte{0x16, 3, 1, 0, 4, 1, 1, 0, 1}, "", ErrHelloTooLarge},
	{"empty body", []byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0}, "", ErrMalformedHello},
	{"two sni extensions", clientHelloRecord(append(extension(0, sniData("a.example")), extension(0, sniData("b.example"))...)), "", ErrMalformedHello},
	{"two host names", clientHelloRecord(extension(0, sniData("a.example", "b.example"))), "", ErrMalformedHello},
	{"empty host name", clientHelloRecord(extension(0, sniData(""))), "", ErrMalformedHello},
	{"space in host name", clientHelloRecord(extension(0, sniData("a b"))), "", ErrMalformedHello},
	{"nul in host name", clientHelloRecord(extension(0, sniData("a\x00.example"))), "", ErrMalformedHello},
	{"empty name list", clientHelloRecord(extension(0, []byte{0, 0})), "", ErrMalformedHello},
	{"name list overruns", clientHelloRecord(extension(0, []byte{0, 9, 0, 0, 1, 'x'})), "", ErrMalformedHello},
	{"extension overruns", clientHelloRecord([]byte{0, 0, 0, 9, 0}), "", ErrMalformedHello},
	{"bytes after the record ignored", append(clientHelloRecord([]byte{}), 0), "", nil},
	{"trailing bytes after extensions", appendToHello(clientHelloRecord([]byte{}), 0), "", ErrMalformedHello},
	{"session id too long", sessionID33(), "", ErrMalformedHello},
}

// appendToHello appends bytes inside a single-record ClientHello, fixing
// the record and handshake lengths.
func appendToHello(record []byte, extra ...byte) []byte {
	out := append(bytes.Clone(record), extra...)
	rec := len(out) - tlsRecordHeaderLen
	msg := rec - tlsHandshakeHdrLen
	out[3], out[4] = byte(rec>>8), byte(rec)
	out[6], out[7], out[8] = byte(msg>>16), byte(msg>>8), byte(msg)
	return out
}

// sessionID33 is a ClientHello whose session id is one byte too long.
func sessionID33() []byte {
	rec := clientHelloRecord(nil)
	at := tlsRecordHeaderLen + tlsHandshakeHdrLen + 2 + 32
	rec[at] = 33
	return appendToHello(rec, make([]byte, 33)...)
}

func TestTLSServerName(t *testing.T) {
	for _, tt := range tlsCases {
		t.Run(tt.name, func(t *testing.T) {
			name, need, err := TLSServerName(tt.in)
			if name != tt.want || need != 0 || !errors.Is(err, tt.wantErr) {
				t.Errorf("TLSServerName(% x) = %q, %d, %v; want %q, 0, %v", tt.in, name, need, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestTLSServerNameReassembly(t *testing.T) {
	hello := clientHelloRecord(extension(0, sniData("split.example")))
	// One payload byte per record splits even the handshake header.
	name, need, err := TLSServerName(refragment(hello, 1))
	if name != "split.example" || need != 0 || err != nil {
		t.Errorf("1-byte records: %q, %d, %v", name, need, err)
	}
	// A record of another type mid-message is not part of a ClientHello.
	broken := refragment(hello, 10)
	broken[15] = 0x17
	if _, _, err := TLSServerName(broken); !errors.Is(err, ErrNotClientHello) {
		t.Errorf("alert mid-hello: %v", err)
	}
}

func BenchmarkTLSServerName(b *testing.B) {
	hello := captureClientHello(b, "example.com")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := TLSServerName(hello); err != nil {
			b.Fatal(err)
		}
	}
}
