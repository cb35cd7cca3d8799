package poll

import (
	"errors"
	"strings"
	"testing"
)

// TestEncodeWriteRoundTrip: every writable type in every order, scaled
// or not, encodes to the function it needs and decodes back (from the
// registers the request carries) to the value written.
func TestEncodeWriteRoundTrip(t *testing.T) {
	cases := []struct {
		tag   Tag
		in    string
		fc    byte
		value Value
	}{
		{Tag{Table: Coil, Address: 7, Type: Bool}, "on", 5, Value{Kind: KindBool, B: true}},
		{Tag{Table: Coil, Address: 7, Type: Bool}, "false", 5, Value{Kind: KindBool}},
		{Tag{Table: Holding, Address: 3, Type: U16}, "65535", 6, Value{Kind: KindUint, U: 65535}},
		{Tag{Table: Holding, Address: 3, Type: I16}, "-2", 6, Value{Kind: KindInt, I: -2}},
		{Tag{Table: Holding, Address: 3, Type: I16, Scale: 0.1}, "-1.5", 6, Value{Kind: KindFloat, F: -1.5}},
		{Tag{Table: Holding, Address: 3, Type: U16, Scale: 0.5, Offset: 10}, `{"v":22.5,"q":"good"}`, 6, Value{Kind: KindFloat, F: 22.5}},
		{Tag{Table: Holding, Address: 3, Type: U32, Order: CDAB}, "70000", 16, Value{Kind: KindUint, U: 70000}},
		{Tag{Table: Holding, Address: 3, Type: I32, Order: BADC}, "-70000", 16, Value{Kind: KindInt, I: -70000}},
		{Tag{Table: Holding, Address: 3, Type: F32, Order: DCBA}, "22.5", 16, Value{Kind: KindFloat, F: 22.5}},
		{Tag{Table: Holding, Address: 3, Type: F64, Order: CDAB}, "-0.125", 16, Value{Kind: KindFloat, F: -0.125}},
		{Tag{Table: Holding, Address: 3, Type: U64, Order: DCBA}, "18446744073709551615", 16, Value{Kind: KindUint, U: 1<<64 - 1}},
		{Tag{Table: Holding, Address: 3, Type: I64}, "-9007199254740993", 16, Value{Kind: KindInt, I: -9007199254740993}},
		{Tag{Table: Holding, Address: 3, Type: String, Length: 3, Order: BADC}, "pump", 16, Value{Kind: KindString, S: "pump"}},
		{Tag{Table: Holding, Address: 3, Type: String, Length: 2}, `{"v":"ab"}`, 16, Value{Kind: KindString, S: "ab"}},
	}
	for _, c := range cases {
		pdu, err := EncodeWrite(c.tag, []byte(c.in))
		if err != nil || pdu[0] != c.fc {
			t.Fatalf("%+v %q: %x, %v; want function %d", c.tag, c.in, pdu, err, c.fc)
		}
		if addr := int(pdu[1])<<8 | int(pdu[2]); addr != c.tag.Address {
			t.Fatalf("%+v: address %d", c.tag, addr)
		}
		var data []byte
		switch c.fc {
		case 5:
			data = []byte{pdu[3] & 1}
		case 6:
			data = pdu[3:5]
		case 16:
			if n := int(pdu[3])<<8 | int(pdu[4]); n != c.tag.Width() || int(pdu[5]) != 2*n || len(pdu) != 6+2*n {
				t.Fatalf("%+v: FC16 header %x", c.tag, pdu[:6])
			}
			data = pdu[6:]
		}
		got, err := Decode(c.tag, c.tag.Address, data)
		if err != nil || got != c.value {
			t.Fatalf("%+v %q: read back %+v, %v; want %+v", c.tag, c.in, got, err, c.value)
		}
	}
}

// TestEncodeWriteRefuses: read-only tables and bits in a register are not
// writable; values out of range, not numbers or too long are refused.
func TestEncodeWriteRefuses(t *testing.T) {
	notWritable := []Tag{{Table: Input, Type: U16}, {Table: Discrete, Type: Bool}, {Table: Holding, Type: Bool, Bit: 3},
		{Table: Holding, Type: U16, Bit: 4, Bits: 4}}
	for _, tag := range notWritable {
		if _, err := EncodeWrite(tag, []byte("1")); !errors.Is(err, ErrNotWritable) {
			t.Errorf("%+v: %v, want ErrNotWritable", tag, err)
		}
	}
	bad := []struct {
		tag Tag
		in  string
	}{
		{Tag{Table: Holding, Type: U16}, "65536"}, {Tag{Table: Holding, Type: U16}, "-1"}, {Tag{Table: Holding, Type: I16}, "40000"},
		{Tag{Table: Holding, Type: U16, Scale: 0.1}, "6553.6"}, {Tag{Table: Holding, Type: U16}, "warm"},
		{Tag{Table: Holding, Type: F32}, "1e39"}, {Tag{Table: Holding, Type: F64}, "NaN"}, {Tag{Table: Coil, Type: Bool}, "2"},
		{Tag{Table: Holding, Type: String, Length: 1}, "abc"}, {Tag{Table: Holding, Type: U64}, "1.9e19"},
		{Tag{Table: Holding, Type: U16}, `{"v":null}`},
	}
	for _, c := range bad {
		if pdu, err := EncodeWrite(c.tag, []byte(c.in)); !errors.Is(err, ErrValue) {
			t.Errorf("%+v %q: %x, %v; want ErrValue", c.tag, c.in, pdu, err)
		}
	}
}

// FuzzEncodeWrite: any tag and payload either is refused with
// ErrNotWritable or ErrValue, or gives a well-formed FC 5, 6 or 16
// request for the tag's address and width whose data decodes; an
// unscaled integer's text round-trips exactly.
func FuzzEncodeWrite(f *testing.F) {
	f.Add(uint8(3), uint8(2), uint8(0), uint16(7), uint8(1), 0.0, 0.0, []byte("42"))
	f.Add(uint8(3), uint8(9), uint8(1), uint16(0), uint8(0), 0.1, 5.0, []byte(`{"v":22.5,"q":"good"}`))
	f.Add(uint8(1), uint8(1), uint8(0), uint16(9), uint8(0), 0.0, 0.0, []byte("on"))
	f.Add(uint8(3), uint8(10), uint8(2), uint16(1), uint8(3), 0.0, 0.0, []byte("pump"))
	f.Add(uint8(3), uint8(6), uint8(3), uint16(1), uint8(0), 0.0, 0.0, []byte("18446744073709551615"))
	f.Fuzz(func(t *testing.T, table, typ, order uint8, addr uint16, length uint8, scale, offset float64, payload []byte) {
		tag := Tag{Table: Table(table), Type: Type(typ), Order: Order(order % 4), Address: int(addr), Length: int(length),
			Scale: scale, Offset: offset}
		pdu, err := EncodeWrite(tag, payload)
		if err != nil {
			if !errors.Is(err, ErrNotWritable) && !errors.Is(err, ErrValue) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if a := int(pdu[1])<<8 | int(pdu[2]); a != tag.Address {
			t.Fatalf("%x: address %d, want %d", pdu, a, tag.Address)
		}
		var data []byte
		switch {
		case pdu[0] == 5 && len(pdu) == 5 && (pdu[3] == 0 || pdu[3] == 0xFF) && pdu[4] == 0:
			data = []byte{pdu[3] & 1}
		case pdu[0] == 6 && len(pdu) == 5 && tag.Width() == 1:
			data = pdu[3:]
		case pdu[0] == 16 && len(pdu) == 6+2*tag.Width() && int(pdu[4]) == tag.Width() && int(pdu[5]) == 2*tag.Width():
			data = pdu[6:]
		default:
			t.Fatalf("tag %+v: malformed request %x", tag, pdu)
		}
		v, err := Decode(tag, tag.Address, data)
		if err != nil {
			if errors.Is(err, ErrNotFinite) { // a finite value scaled back can overflow
				return
			}
			t.Fatalf("tag %+v: %x does not decode: %v", tag, pdu, err)
		}
		if v.Kind == KindInt || v.Kind == KindUint {
			if got := string(v.AppendJSON(nil)); got != string(valueOf(payload)) && isIntegerText(valueOf(payload)) {
				t.Fatalf("tag %+v: wrote %q, reads %s", tag, payload, got)
			}
		}
	})
}

// isIntegerText reports whether p is a plain decimal integer (no sign
// of +, no leading zeros), the text an exact round-trip keeps.
func isIntegerText(p []byte) bool {
	s := string(p)
	if strings.HasPrefix(s, "-") {
		s = s[1:]
	}
	if s == "" || (len(s) > 1 && s[0] == '0') || s == "0" && string(p) == "-0" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
