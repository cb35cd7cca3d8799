package poll

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

// regs is register data: each value one register, big-endian on the wire.
func regs(ws ...uint16) []byte {
	b := make([]byte, 0, 2*len(ws))
	for _, w := range ws {
		b = append(b, byte(w>>8), byte(w))
	}
	return b
}

func TestDecode(t *testing.T) {
	f32 := math.Float32bits(-12.5) // 0xC1480000
	f64 := math.Float64bits(1234.5678)
	h := func(k int) uint16 { return uint16(f64 >> (48 - 16*k)) }
	tests := []struct {
		name  string
		tag   Tag
		first int
		data  []byte
		want  Value
	}{
		{"coil 0", Tag{Table: Coil, Address: 0, Type: Bool}, 0, []byte{0b10}, Value{Kind: KindBool}},
		{"coil 9 of a span at 0", Tag{Table: Coil, Address: 9, Type: Bool}, 0, []byte{0, 0b10}, Value{Kind: KindBool, B: true}},
		{"discrete 3 of a span at 2", Tag{Table: Discrete, Address: 3, Type: Bool}, 2, []byte{0b10}, Value{Kind: KindBool, B: true}},
		{"u16", Tag{Table: Holding, Address: 1, Type: U16}, 0, regs(1, 0xFFFE), Value{Kind: KindUint, U: 0xFFFE}},
		{"u16 BADC", Tag{Table: Holding, Type: U16, Order: BADC}, 0, regs(0x3412), Value{Kind: KindUint, U: 0x1234}},
		{"i16", Tag{Table: Input, Type: I16}, 0, regs(0xFFFE), Value{Kind: KindInt, I: -2}},
		{"u32 ABCD", Tag{Table: Holding, Type: U32}, 0, regs(0x0001, 0x0002), Value{Kind: KindUint, U: 0x00010002}},
		{"u32 CDAB", Tag{Table: Holding, Type: U32, Order: CDAB}, 0, regs(0x0002, 0x0001), Value{Kind: KindUint, U: 0x00010002}},
		{"u32 BADC", Tag{Table: Holding, Type: U32, Order: BADC}, 0, regs(0x0100, 0x0200), Value{Kind: KindUint, U: 0x00010002}},
		{"u32 DCBA", Tag{Table: Holding, Type: U32, Order: DCBA}, 0, regs(0x0200, 0x0100), Value{Kind: KindUint, U: 0x00010002}},
		{"i32", Tag{Table: Holding, Type: I32}, 0, regs(0xFFFF, 0xFFFD), Value{Kind: KindInt, I: -3}},
		{"f32 ABCD", Tag{Table: Holding, Type: F32}, 0, regs(uint16(f32>>16), uint16(f32)), Value{Kind: KindFloat, F: -12.5}},
		{"f32 CDAB", Tag{Table: Holding, Type: F32, Order: CDAB}, 0, regs(uint16(f32), uint16(f32>>16)), Value{Kind: KindFloat, F: -12.5}},
		{"f32 DCBA", Tag{Table: Holding, Type: F32, Order: DCBA}, 0, regs(0x0000, 0x48C1), Value{Kind: KindFloat, F: -12.5}},
		{"u64 past 2^53 exact", Tag{Table: Holding, Type: U64}, 0, regs(0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF), Value{Kind: KindUint, U: math.MaxUint64}},
		{"u64 CDAB", Tag{Table: Holding, Type: U64, Order: CDAB}, 0, regs(4, 3, 2, 1), Value{Kind: KindUint, U: 0x0001000200030004}},
		{"i64", Tag{Table: Holding, Type: I64}, 0, regs(0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF), Value{Kind: KindInt, I: -1}},
		{"f64 ABCD", Tag{Table: Holding, Type: F64}, 0, regs(h(0), h(1), h(2), h(3)), Value{Kind: KindFloat, F: 1234.5678}},
		{"f64 DCBA", Tag{Table: Holding, Type: F64, Order: DCBA}, 0,
			regs(h(3)<<8|h(3)>>8, h(2)<<8|h(2)>>8, h(1)<<8|h(1)>>8, h(0)<<8|h(0)>>8), Value{Kind: KindFloat, F: 1234.5678}},
		{"string", Tag{Table: Holding, Type: String, Length: 3}, 0, regs('A'<<8|'B', 'C'<<8, 0), Value{Kind: KindString, S: "ABC"}},
		{"string BADC", Tag{Table: Holding, Type: String, Length: 2, Order: BADC}, 0, regs('B'<<8|'A', ' '<<8|'C'), Value{Kind: KindString, S: "ABC"}},
		{"bit 0", Tag{Table: Holding, Type: Bool, Bit: 0}, 0, regs(0x0001), Value{Kind: KindBool, B: true}},
		{"bit 15", Tag{Table: Holding, Type: Bool, Bit: 15}, 0, regs(0x7FFF), Value{Kind: KindBool}},
		{"bit field 4..7", Tag{Table: Holding, Type: U16, Bit: 4, Bits: 4}, 0, regs(0xABCD), Value{Kind: KindUint, U: 0xC}},
		{"scale and offset", Tag{Table: Input, Type: I16, Scale: 0.1, Offset: -40}, 0, regs(0xFFF6), Value{Kind: KindFloat, F: -41}},
		{"u16 scaled", Tag{Table: Input, Type: U16, Scale: 2, Address: 6}, 5, regs(0, 21), Value{Kind: KindFloat, F: 42}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.tag.Check(); err != nil {
				t.Fatalf("Check: %v", err)
			}
			got, err := Decode(tt.tag, tt.first, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind == KindFloat && tt.want.Kind == KindFloat {
				if math.Abs(got.F-tt.want.F) > 1e-9 {
					t.Fatalf("got %v, want %v", got.F, tt.want.F)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	nan := math.Float32bits(float32(math.NaN()))
	tests := []struct {
		name  string
		tag   Tag
		first int
		data  []byte
		want  error
	}{
		{"NaN", Tag{Table: Holding, Type: F32}, 0, regs(uint16(nan>>16), uint16(nan)), ErrNotFinite},
		{"scaled to infinity", Tag{Table: Holding, Type: F64, Scale: math.MaxFloat64}, 0, regs(0x7FEF, 0xFFFF, 0xFFFF, 0xFFFF), ErrNotFinite},
		{"short", Tag{Table: Holding, Type: U32}, 0, regs(1), ErrShort},
		{"before the span", Tag{Table: Holding, Type: U16, Address: 1}, 2, regs(1), ErrShort},
		{"bits short", Tag{Table: Coil, Type: Bool, Address: 8}, 0, []byte{0xFF}, ErrShort},
	}
	for _, tt := range tests {
		if _, err := Decode(tt.tag, tt.first, tt.data); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestTagCheck(t *testing.T) {
	bad := []Tag{
		{Table: Coil, Type: U16},
		{Table: Holding, Type: String},
		{Table: Holding, Type: Bool, Bit: 16},
		{Table: Holding, Type: U16, Bit: 12, Bits: 5},
		{Table: Holding, Type: I16, Bits: 3},
		{Table: Holding, Type: U64, Address: 65533},
		{Table: 9, Type: U16},
	}
	for _, tag := range bad {
		if tag.Check() == nil {
			t.Errorf("%+v passed Check", tag)
		}
	}
}

// FuzzDecode: any tag over any data decodes or fails with ErrShort or
// ErrNotFinite, never panics, and what it decodes is valid JSON.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(3), uint8(4), uint8(0), uint8(0), uint8(0), uint16(0), uint16(0), 0.0, []byte{0x41, 0x48, 0, 0})
	f.Add(uint8(3), uint8(10), uint8(1), uint8(2), uint8(0), uint16(1), uint16(0), 1.0, []byte("hello, world"))
	f.Add(uint8(1), uint8(1), uint8(0), uint8(0), uint8(0), uint16(9), uint16(0), 0.0, []byte{0xFF, 0x01})
	f.Add(uint8(4), uint8(2), uint8(3), uint8(4), uint8(4), uint16(0), uint16(0), 0.5, []byte{0xAB, 0xCD})
	f.Fuzz(func(t *testing.T, table, typ, order, bit, bits uint8, addr, first uint16, scale float64, data []byte) {
		tag := Tag{Table: Table(table), Type: Type(typ), Order: Order(order % 4), Bit: int(bit), Bits: int(bits),
			Address: int(addr), Length: len(data) / 2, Scale: scale}
		if tag.Check() != nil {
			return
		}
		v, err := Decode(tag, int(first), data)
		if err != nil {
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrNotFinite) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !json.Valid(v.AppendJSON(nil)) {
			t.Fatalf("%+v is not valid JSON: %s", v, v.AppendJSON(nil))
		}
	})
}
