package poll

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrShort is a response that does not cover the tag: a device that
// answered fewer registers than asked, which CheckResponse refuses, so
// only a planner bug reaches it.
var ErrShort = errors.New("modbus: response does not cover the tag")

// ErrNotFinite is a float register pair holding NaN or an infinity: no
// measurement, and JSON has no way to say it.
var ErrNotFinite = errors.New("modbus: float value is NaN or infinite")

// Kind is what a Value holds.
type Kind uint8

// The kinds of value.
const (
	KindBool  Kind = iota + 1
	KindInt        // exact: an integer type with no scale or offset
	KindUint       // exact, as KindInt, for unsigned types
	KindFloat      // floats, and integers scaled or offset
	KindString
)

// Value is a decoded tag value. Integers without scale and offset stay
// exact (a uint64 counter past 2^53 must not round).
type Value struct {
	Kind Kind
	B    bool
	I    int64
	U    uint64
	F    float64
	S    string
}

// Equal reports whether v and w are the same value.
func (v Value) Equal(w Value) bool { return v == w }

// Within reports whether v differs from w by at most deadband (numbers;
// other kinds compare equal or not).
func (v Value) Within(w Value, deadband float64) bool {
	if v.Kind != w.Kind {
		return false
	}
	switch v.Kind {
	case KindInt:
		return math.Abs(float64(v.I)-float64(w.I)) <= deadband
	case KindUint:
		return math.Abs(float64(v.U)-float64(w.U)) <= deadband
	case KindFloat:
		return math.Abs(v.F-w.F) <= deadband
	}
	return v == w
}

// AppendJSON appends v as a JSON value.
func (v Value) AppendJSON(dst []byte) []byte {
	switch v.Kind {
	case KindBool:
		return strconv.AppendBool(dst, v.B)
	case KindInt:
		return strconv.AppendInt(dst, v.I, 10)
	case KindUint:
		return strconv.AppendUint(dst, v.U, 10)
	case KindFloat:
		return strconv.AppendFloat(dst, v.F, 'g', -1, 64)
	case KindString:
		// Go's quoting (\x00) is not JSON's (\u0000): the fuzz target
		// found a NUL inside a device's string.
		q, _ := json.Marshal(v.S) // a string always marshals
		return append(dst, q...)
	}
	return append(dst, "null"...)
}

// Decode reads tag t from the data of a read response (the bytes after
// the byte count) that starts at address first of t's table: registers
// two bytes each, big-endian; bits packed eight to a byte, lowest first.
func Decode(t Tag, first int, data []byte) (Value, error) {
	off := t.Address - first
	if off < 0 {
		return Value{}, ErrShort
	}
	if t.Table.Bits() {
		if off/8 >= len(data) {
			return Value{}, ErrShort
		}
		return Value{Kind: KindBool, B: data[off/8]>>(off%8)&1 == 1}, nil
	}
	end := 2 * (off + t.Width())
	if end > len(data) {
		return Value{}, ErrShort
	}
	regs := data[2*off : end]
	switch t.Type {
	case Bool:
		return Value{Kind: KindBool, B: word(regs, t.Order)>>t.Bit&1 == 1}, nil
	case String:
		return Value{Kind: KindString, S: text(regs, t.Order)}, nil
	case F32:
		return finite(t, float64(math.Float32frombits(uint32(ordered(regs, t.Order)))))
	case F64:
		return finite(t, math.Float64frombits(ordered(regs, t.Order)))
	}
	u := ordered(regs, t.Order)
	switch t.Type {
	case U16:
		if t.Bits > 0 {
			u = u >> t.Bit & (1<<t.Bits - 1)
		}
		return number(t, false, u)
	case I16:
		return number(t, true, uint64(int64(int16(u))))
	case I32:
		return number(t, true, uint64(int64(int32(u))))
	case I64:
		return number(t, true, u)
	}
	return number(t, false, u) // U32, U64
}

// word is a 16-bit register in order o (byte-swapped for BADC and DCBA).
func word(regs []byte, o Order) uint16 {
	w := binary.BigEndian.Uint16(regs)
	if o == BADC || o == DCBA {
		w = w<<8 | w>>8
	}
	return w
}

// ordered puts the registers' bytes in value order and reads them as an
// unsigned big-endian integer of their width.
func ordered(regs []byte, o Order) uint64 {
	n := len(regs) / 2
	var u uint64
	for i := range n {
		k := i
		if o == CDAB || o == DCBA {
			k = n - 1 - i // low word first on the wire
		}
		u = u<<16 | uint64(word(regs[2*k:], o))
	}
	return u
}

// text reads a string two characters to a register, high byte first
// (BADC and DCBA: low byte first), trailing NULs and spaces dropped.
// Invalid UTF-8 is replaced, so the JSON stays valid.
func text(regs []byte, o Order) string {
	b := make([]byte, 0, len(regs))
	for i := 0; i+1 < len(regs); i += 2 {
		w := word(regs[i:], o)
		b = append(b, byte(w>>8), byte(w))
	}
	s := strings.TrimRight(string(b), "\x00 ")
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}

// number is an integer tag's value: exact without scale and offset.
func number(t Tag, signed bool, u uint64) (Value, error) {
	if (t.Scale == 0 || t.Scale == 1) && t.Offset == 0 {
		if signed {
			return Value{Kind: KindInt, I: int64(u)}, nil
		}
		return Value{Kind: KindUint, U: u}, nil
	}
	f := float64(u)
	if signed {
		f = float64(int64(u))
	}
	return finite(t, f)
}

// finite scales a float tag's value, which must stay a number: JSON has
// no NaN or infinity, and a device's NaN means no measurement.
func finite(t Tag, f float64) (Value, error) {
	f = f*scale(t) + t.Offset
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Value{}, ErrNotFinite
	}
	return Value{Kind: KindFloat, F: f}, nil
}

func scale(t Tag) float64 {
	if t.Scale == 0 {
		return 1
	}
	return t.Scale
}
