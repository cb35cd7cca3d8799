// Package poll is edgemux's Modbus register poller: the tags of upstream
// devices read on intervals, their reads coalesced into as few requests
// as the limits allow (plan.go), the answers decoded to values
// (decode.go) and published to the bus with quality and the poll's
// timestamp (poller.go). Planning and decoding are pure; the poller is
// the thin loop around them on protocols/modbus/upstream's lines.
package poll

import "fmt"

// Table is one of the four Modbus data tables.
type Table uint8

// The tables, by the function that reads them.
const (
	Coil     Table = 1 // FC 1
	Discrete Table = 2 // FC 2
	Holding  Table = 3 // FC 3
	Input    Table = 4 // FC 4
)

// ParseTable reads a table's configuration name.
func ParseTable(s string) (Table, error) {
	switch s {
	case "coil":
		return Coil, nil
	case "discrete":
		return Discrete, nil
	case "holding":
		return Holding, nil
	case "input":
		return Input, nil
	}
	return 0, fmt.Errorf("unknown table %q", s)
}

// Bits reports whether the table holds bits (coils, discrete inputs)
// rather than 16-bit registers.
func (t Table) Bits() bool { return t == Coil || t == Discrete }

// Type is how a tag's registers (or bit) read as a value.
type Type uint8

// The types. Bool is a coil or discrete input, or one bit of a register.
const (
	Bool Type = iota + 1
	U16
	I16
	U32
	I32
	U64
	I64
	F32
	F64
	String
)

var typeNames = map[string]Type{"bool": Bool, "uint16": U16, "int16": I16, "uint32": U32, "int32": I32,
	"uint64": U64, "int64": I64, "float32": F32, "float64": F64, "string": String}

// ParseType reads a type's configuration name.
func ParseType(s string) (Type, error) {
	if t, ok := typeNames[s]; ok {
		return t, nil
	}
	return 0, fmt.Errorf("unknown type %q", s)
}

// Order is the byte order of a value's registers, named by where the
// bytes of the big-endian value A B C D (A most significant) sit on the
// wire. 64-bit values extend it: CDAB swaps the order of the words, BADC
// the bytes in each word, DCBA both (little-endian).
type Order uint8

// The orders.
const (
	ABCD Order = iota // big-endian, high word first (the Modbus norm)
	CDAB              // low word first, bytes big-endian
	BADC              // high word first, bytes swapped
	DCBA              // little-endian
)

// ParseOrder reads an order's configuration name; "" is ABCD.
func ParseOrder(s string) (Order, error) {
	switch s {
	case "", "ABCD":
		return ABCD, nil
	case "CDAB":
		return CDAB, nil
	case "BADC":
		return BADC, nil
	case "DCBA":
		return DCBA, nil
	}
	return 0, fmt.Errorf("unknown byte order %q", s)
}

// Tag is one value polled from a device.
type Tag struct {
	Topic   string
	Table   Table
	Address int     // first coil or register, 0-based
	Type    Type    // Bool on a register reads Bit
	Order   Order   // for registers
	Bit     int     // a bit field's lowest bit, 0..15, in its register (Bool, or U16 with Bits)
	Bits    int     // a bit field's width in bits (U16 only); 0 = the whole register
	Length  int     // String: registers (two characters each)
	Scale   float64 // value = raw x Scale + Offset, for numbers; 0 = 1
	Offset  float64
}

// Width is how many coils or registers the tag covers.
func (t Tag) Width() int {
	if t.Table.Bits() {
		return 1
	}
	switch t.Type {
	case Bool, U16, I16:
		return 1
	case U32, I32, F32:
		return 2
	case U64, I64, F64:
		return 4
	case String:
		return t.Length
	}
	return 0
}

// Check reports what makes a tag unreadable: a type its table cannot
// hold, a bit outside a register, a tag past address 65535.
func (t Tag) Check() error {
	switch {
	case t.Table < Coil || t.Table > Input:
		return fmt.Errorf("unknown table %d", t.Table)
	case t.Table.Bits() && t.Type != Bool:
		return fmt.Errorf("coils and discrete inputs are bool")
	case t.Type == String && (t.Length < 1 || t.Length > 123):
		return fmt.Errorf("a string is 1..123 registers long, not %d", t.Length)
	case t.Bit < 0 || t.Bit > 15 || t.Bits < 0 || t.Bit+t.Bits > 16:
		return fmt.Errorf("bit field %d+%d outside a register's 16 bits", t.Bit, t.Bits)
	case t.Bits > 0 && t.Type != U16:
		return fmt.Errorf("a bit field of several bits is uint16")
	case t.Width() == 0:
		return fmt.Errorf("unknown type %d", t.Type)
	case t.Address < 0 || t.Address+t.Width() > 1<<16:
		return fmt.Errorf("address %d leaves the tag past 65535", t.Address)
	}
	return nil
}
