package poll

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// ErrNotWritable is a tag that cannot be written: not a coil or holding
// register, or a bit inside a register (writing it would need the rest
// of the register, which another master may change meanwhile).
var ErrNotWritable = errors.New("modbus: tag cannot be written")

// ErrValue is a value a tag cannot carry: not a number (or a bool, or a
// string) of its type, or out of its range once scale and offset are
// undone.
var ErrValue = errors.New("modbus: value does not fit the tag")

// The write functions.
const (
	fcWriteCoil      = 5
	fcWriteRegister  = 6
	fcWriteRegisters = 16
)

// Writable reports whether t can be written at all: a coil, or holding
// registers holding a whole value (not a bit or a bit field of one).
func (t Tag) Writable() bool {
	switch {
	case t.Table == Coil:
		return true
	case t.Table != Holding:
		return false
	}
	return t.Type != Bool && t.Bits == 0
}

// EncodeWrite is the request PDU that writes the value in payload to
// tag t: FC 5 for a coil, FC 6 for one holding register, FC 16 for
// several. It is Decode inverted: raw = (value - offset) / scale, rounded
// for integers, laid out in the tag's order. The payload is the value's
// text as any protocol puts it on the bus (22.5, true, on, a string's
// text) or a JSON object with "v" (the poller's own payload shape).
func EncodeWrite(t Tag, payload []byte) ([]byte, error) {
	if !t.Writable() || t.Check() != nil {
		return nil, ErrNotWritable
	}
	payload = valueOf(payload)
	if t.Table == Coil {
		on, err := parseBool(payload)
		if err != nil {
			return nil, err
		}
		v := uint16(0)
		if on {
			v = 0xFF00
		}
		return []byte{fcWriteCoil, byte(t.Address >> 8), byte(t.Address), byte(v >> 8), byte(v)}, nil
	}
	regs, err := encodeRegisters(t, payload)
	if err != nil {
		return nil, err
	}
	if len(regs) == 2 {
		return append([]byte{fcWriteRegister, byte(t.Address >> 8), byte(t.Address)}, regs...), nil
	}
	n := len(regs) / 2
	pdu := []byte{fcWriteRegisters, byte(t.Address >> 8), byte(t.Address), byte(n >> 8), byte(n), byte(len(regs))}
	return append(pdu, regs...), nil
}

// valueOf takes "v" out of a JSON object payload; others are the value.
func valueOf(payload []byte) []byte {
	p := bytes.TrimSpace(payload)
	if len(p) == 0 || p[0] != '{' {
		return p
	}
	var obj struct {
		V json.RawMessage `json:"v"`
	}
	if json.Unmarshal(p, &obj) != nil || len(obj.V) == 0 {
		return p // not a value: refused by the parse
	}
	if obj.V[0] == '"' {
		var s string
		if json.Unmarshal(obj.V, &s) == nil {
			return []byte(s)
		}
	}
	return obj.V
}

func parseBool(p []byte) (bool, error) {
	switch string(p) {
	case "true", "on", "1":
		return true, nil
	case "false", "off", "0":
		return false, nil
	}
	return false, fmt.Errorf("%w: %.32q is not true/false, on/off or 1/0", ErrValue, p)
}

// encodeRegisters lays out the registers of a holding tag's new value.
func encodeRegisters(t Tag, p []byte) ([]byte, error) {
	if t.Type == String {
		if !utf8.Valid(p) || len(p) > 2*t.Length {
			return nil, fmt.Errorf("%w: a string of at most %d bytes of UTF-8", ErrValue, 2*t.Length)
		}
		regs := make([]byte, 2*t.Length) // NUL padded, as Decode drops
		copy(regs, p)
		return reorder(regs, t.Order, true), nil
	}
	f, err := strconv.ParseFloat(string(p), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%w: %.32q is not a finite number", ErrValue, p)
	}
	raw := (f - t.Offset) / scale(t)
	var u uint64
	switch t.Type {
	case F32:
		if math.Abs(raw) > math.MaxFloat32 {
			return nil, fmt.Errorf("%w: %v is out of float32's range", ErrValue, f)
		}
		u = uint64(math.Float32bits(float32(raw)))
	case F64:
		u = math.Float64bits(raw)
	default:
		if u, err = integer(t.Type, raw, p, (t.Scale == 0 || t.Scale == 1) && t.Offset == 0); err != nil {
			return nil, err
		}
	}
	regs := make([]byte, 2*t.Width())
	for i := range t.Width() {
		binary.BigEndian.PutUint16(regs[2*i:], uint16(u>>(16*(t.Width()-1-i))))
	}
	return reorder(regs, t.Order, false), nil
}

// intRange is each integer type's range of raw values.
var intRange = map[Type][2]float64{U16: {0, math.MaxUint16}, I16: {math.MinInt16, math.MaxInt16},
	U32: {0, math.MaxUint32}, I32: {math.MinInt32, math.MaxInt32}, U64: {0, math.MaxUint64}, I64: {math.MinInt64, math.MaxInt64}}

// integer is raw, rounded, as an integer type's bits, if it fits.
// Unscaled 64-bit values are parsed from their text, exact past 2^53.
func integer(typ Type, raw float64, text []byte, exact bool) (uint64, error) {
	lo, hi := intRange[typ][0], intRange[typ][1]
	if exact && typ == U64 {
		if u, err := strconv.ParseUint(string(text), 10, 64); err == nil {
			return u, nil
		}
	}
	if exact && typ == I64 {
		if i, err := strconv.ParseInt(string(text), 10, 64); err == nil {
			return uint64(i), nil
		}
	}
	r := math.Round(raw)
	if r < lo || r > hi || (typ == U64 && r >= 1<<64) || (typ == I64 && r >= 1<<63) {
		return 0, fmt.Errorf("%w: %v is out of the register's range", ErrValue, raw)
	}
	if lo < 0 {
		return uint64(int64(r)), nil
	}
	return uint64(r), nil
}

// reorder turns big-endian registers (the value ABCD) into the tag's
// wire order: the inverse of ordered and word. Strings keep their
// register order; only their bytes swap.
func reorder(regs []byte, o Order, text bool) []byte {
	if o == BADC || o == DCBA {
		for i := 0; i+1 < len(regs); i += 2 {
			regs[i], regs[i+1] = regs[i+1], regs[i]
		}
	}
	if !text && (o == CDAB || o == DCBA) {
		n := len(regs) / 2
		for i := range n / 2 {
			a, b := regs[2*i:2*i+2], regs[2*(n-1-i):2*(n-1-i)+2]
			a[0], a[1], b[0], b[1] = b[0], b[1], a[0], a[1]
		}
	}
	return regs
}
