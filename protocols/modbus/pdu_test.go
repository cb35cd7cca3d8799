package modbus

import (
	"bytes"
	"errors"
	"testing"
)

// adu builds a request ADU around pdu.
func adu(tx uint16, unit byte, pdu ...byte) []byte {
	n := len(pdu) + 1
	return append([]byte{byte(tx >> 8), byte(tx), 0, 0, byte(n >> 8), byte(n), unit}, pdu...)
}

func TestParseADU(t *testing.T) {
	whole := adu(0x1234, 7, 0x03, 0, 1, 0, 2)
	tests := []struct {
		name string
		in   []byte
		n    int
		err  error
	}{
		{"empty", nil, 0, nil},
		{"header only", whole[:6], 0, nil},
		{"short PDU", whole[:len(whole)-1], 0, nil},
		{"whole", whole, len(whole), nil},
		{"two pipelined", append(append([]byte{}, whole...), whole...), len(whole), nil},
		{"protocol id", []byte{0, 1, 0, 1, 0, 6}, 0, ErrProtocolID},
		{"length 1", []byte{0, 1, 0, 0, 0, 1, 7}, 0, ErrLength},
		{"length 255", []byte{0, 1, 0, 0, 0, 255}, 0, ErrLength},
	}
	for _, tt := range tests {
		a, n, err := ParseADU(tt.in)
		if n != tt.n || !errors.Is(err, tt.err) {
			t.Errorf("%s: n %d err %v, want %d %v", tt.name, n, err, tt.n, tt.err)
		}
		if n > 0 && (a.Transaction != 0x1234 || a.Unit != 7 || !bytes.Equal(a.PDU, whole[7:])) {
			t.Errorf("%s: %+v", tt.name, a)
		}
	}
}

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name string
		pdu  []byte
		want Request
		exc  byte
	}{
		{"read coils", []byte{0x01, 0, 10, 0, 13}, Request{Function: 1, Address: 10, Quantity: 13}, 0},
		{"read 2000 inputs", []byte{0x02, 0, 0, 0x07, 0xD0}, Request{Function: 2, Quantity: 2000}, 0},
		{"read 2001 coils", []byte{0x01, 0, 0, 0x07, 0xD1}, Request{Function: 1, Quantity: 2001}, IllegalDataValue},
		{"read 125 registers", []byte{0x03, 0, 0, 0, 125}, Request{Function: 3, Quantity: 125}, 0},
		{"read 126 registers", []byte{0x04, 0, 0, 0, 126}, Request{Function: 4, Quantity: 126}, IllegalDataValue},
		{"read 0", []byte{0x03, 0, 0, 0, 0}, Request{Function: 3}, IllegalDataValue},
		{"read past 65535", []byte{0x03, 0xFF, 0xFF, 0, 2}, Request{Function: 3, Address: 0xFFFF, Quantity: 2}, IllegalDataAddress},
		{"read, long PDU", []byte{0x03, 0, 0, 0, 1, 9}, Request{Function: 3}, IllegalDataValue},
		{"coil on", []byte{0x05, 0, 3, 0xFF, 0}, Request{Function: 5, Address: 3, Quantity: 1, Values: []byte{0xFF, 0}}, 0},
		{"coil 0x1234", []byte{0x05, 0, 3, 0x12, 0x34}, Request{Function: 5, Address: 3, Quantity: 1, Values: []byte{0x12, 0x34}}, IllegalDataValue},
		{"register", []byte{0x06, 0, 1, 0xAB, 0xCD}, Request{Function: 6, Address: 1, Quantity: 1, Values: []byte{0xAB, 0xCD}}, 0},
		{"coils", []byte{0x0F, 0, 0, 0, 10, 2, 0xFF, 0x03}, Request{Function: 15, Quantity: 10, Values: []byte{0xFF, 0x03}}, 0},
		{"coils, byte count off", []byte{0x0F, 0, 0, 0, 10, 1, 0xFF}, Request{Function: 15, Quantity: 10}, IllegalDataValue},
		{"registers", []byte{0x10, 0, 4, 0, 2, 4, 0, 1, 0, 2}, Request{Function: 16, Address: 4, Quantity: 2, Values: []byte{0, 1, 0, 2}}, 0},
		{"registers, short", []byte{0x10, 0, 4, 0, 2, 4, 0, 1, 0}, Request{Function: 16, Address: 4, Quantity: 2}, IllegalDataValue},
		{"124 registers", append([]byte{0x10, 0, 0, 0, 124, 248}, make([]byte, 248)...), Request{Function: 16, Quantity: 124}, IllegalDataValue},
		{"unknown function", []byte{0x2B, 0x0E, 1, 0}, Request{Function: 0x2B}, IllegalFunction},
		{"empty", nil, Request{}, IllegalFunction},
	}
	for _, tt := range tests {
		got, exc := ParseRequest(tt.pdu)
		if exc != tt.exc {
			t.Errorf("%s: exception %d, want %d", tt.name, exc, tt.exc)
			continue
		}
		if exc == 0 && (got.Function != tt.want.Function || got.Address != tt.want.Address ||
			got.Quantity != tt.want.Quantity || !bytes.Equal(got.Values, tt.want.Values)) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestResponses(t *testing.T) {
	a := ADU{Transaction: 0x0102, Unit: 9}
	if got := AppendException(nil, a, 0x03, IllegalDataAddress); !bytes.Equal(got, []byte{1, 2, 0, 0, 0, 3, 9, 0x83, 0x02}) {
		t.Errorf("exception % x", got)
	}
	if got := AppendReadResponse(nil, a, 0x03, []byte{0, 217}); !bytes.Equal(got, []byte{1, 2, 0, 0, 0, 5, 9, 0x03, 2, 0, 217}) {
		t.Errorf("read % x", got)
	}
	single := Request{Function: 6, Address: 7, Quantity: 1, Values: []byte{0xAB, 0xCD}}
	if got := AppendWriteResponse(nil, a, single); !bytes.Equal(got, []byte{1, 2, 0, 0, 0, 6, 9, 0x06, 0, 7, 0xAB, 0xCD}) {
		t.Errorf("write single % x", got)
	}
	multi := Request{Function: 16, Address: 7, Quantity: 2, Values: []byte{0, 1, 0, 2}}
	if got := AppendWriteResponse(nil, a, multi); !bytes.Equal(got, []byte{1, 2, 0, 0, 0, 6, 9, 0x10, 0, 7, 0, 2}) {
		t.Errorf("write multiple % x", got)
	}
}

// FuzzParse: any bytes give either a partial ADU (n 0), an error, or an
// ADU whose length field matches n; its request either parses within its
// function's limits or gets an exception, never a panic.
func FuzzParse(f *testing.F) {
	f.Add(adu(1, 1, 0x03, 0, 0, 0, 1))
	f.Add(adu(1, 1, 0x10, 0, 4, 0, 2, 4, 0, 1, 0, 2))
	f.Add(adu(1, 1, 0x0F, 0, 0, 0, 10, 2, 0xFF, 0x03))
	f.Add(adu(1, 1, 0x05, 0, 3, 0xFF, 0))
	f.Add([]byte{0, 1, 0, 0, 0, 255})
	f.Fuzz(func(t *testing.T, p []byte) {
		a, n, err := ParseADU(p)
		if err != nil || n == 0 {
			return
		}
		if n != mbapSize+len(a.PDU) || n > len(p) || len(a.PDU) == 0 || len(a.PDU) > maxPDU {
			t.Fatalf("n %d, PDU %d bytes", n, len(a.PDU))
		}
		req, exc := ParseRequest(a.PDU)
		if exc == 0 && (req.Quantity == 0 || int(req.Address)+int(req.Quantity) > 1<<16) {
			t.Fatalf("accepted %+v", req)
		}
	})
}
