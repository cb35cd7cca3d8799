// Package mbsim is a fast Modbus TCP device simulator for benchmarks:
// many devices, each a listener of its own (on its own loopback address
// and port), each serving the same 30 tags of mixed types in its holding
// and input registers, with values that change on every read. It answers
// FC 3 and FC 4 and gives every other function exception 01.
//
// The layout of the tags is exported (Tags) so that a poller's
// configuration and a hand-written decoder can be made from it, and
// Expected says what a tag must decode to, so a benchmark can check it
// decodes real values rather than count bytes.
package mbsim

import (
	"encoding/binary"
	"math"
)

// Type is a tag's register type, named as edgemux's configuration names it.
type Type string

// The types the layout uses.
const (
	U16 Type = "uint16"
	I16 Type = "int16"
	U32 Type = "uint32"
	I32 Type = "int32"
	F32 Type = "float32"
	F64 Type = "float64"
)

// Width is the tag's size in registers.
func (t Type) Width() int {
	switch t {
	case U32, I32, F32:
		return 2
	case F64:
		return 4
	}
	return 1
}

// Tag is one simulated value: its registers from Address, high word first.
type Tag struct {
	Name    string
	Type    Type
	Address int
}

// Tags is every device's layout: 30 tags in 54 registers from address 0,
// packed without gaps, the types mixed so that decoding them is real work.
var Tags = layout()

// Registers is how many registers the layout covers, from address 0.
var Registers = Tags[len(Tags)-1].Address + Tags[len(Tags)-1].Type.Width()

func layout() []Tag {
	types := []Type{U16, I32, F32, U16, I16, F32, U32, U16, F64, I32} // 18 registers per round
	var tags []Tag
	addr := 0
	for i := range 30 {
		t := types[i%len(types)]
		tags = append(tags, Tag{Name: "t" + itoa(i), Type: t, Address: addr})
		addr += t.Width()
	}
	return tags
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// Expected is tag k's value at generation gen (the device's read count,
// from 1), as the decoded number.
func Expected(k int, gen uint64) float64 {
	g := int64(gen)
	switch Tags[k].Type {
	case U16:
		return float64(uint16(g + int64(k)))
	case I16:
		return float64(int16(-g - int64(k)))
	case U32:
		return float64(uint32(g*1000 + int64(k)))
	case I32:
		return float64(int32(-g*1000 - int64(k)))
	case F32:
		return float64(float32(g)*0.25 + float32(k))
	}
	return float64(g)*0.125 + float64(k) // F64
}

// Fill writes every tag's registers at generation gen into regs (2 bytes
// each, big-endian, at least 2*Registers long), as a device would hold them.
func Fill(regs []byte, gen uint64) {
	for k, t := range Tags {
		b := regs[2*t.Address:]
		v := Expected(k, gen)
		switch t.Type {
		case U16:
			binary.BigEndian.PutUint16(b, uint16(v))
		case I16:
			binary.BigEndian.PutUint16(b, uint16(int16(v)))
		case U32:
			binary.BigEndian.PutUint32(b, uint32(v))
		case I32:
			binary.BigEndian.PutUint32(b, uint32(int32(v)))
		case F32:
			binary.BigEndian.PutUint32(b, math.Float32bits(float32(v)))
		case F64:
			binary.BigEndian.PutUint64(b, math.Float64bits(v))
		}
	}
}
