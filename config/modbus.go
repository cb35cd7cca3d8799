package config

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Modbus register map limits.
const (
	maxModbusTags  = 10000
	maxModbusUnits = 256
	maxModbusTopic = 256
)

// modbusTables and modbusTypes are the words a tag may use; the width of
// a type is in coils or registers.
var (
	modbusTables = []string{"coil", "discrete", "input", "holding"}
	modbusWidth  = map[string]int{"bool": 1, "uint16": 1, "int16": 1, "uint32": 2, "int32": 2, "float32": 2}
)

// ModbusWidth is how many coils or registers a tag of type t covers (0 for
// an unknown type).
func ModbusWidth(t string) int { return modbusWidth[t] }

// checkModbus checks the unit ids and the register map: every tag on its
// own, then that no two tags of a table overlap.
func (v *validator) checkModbus() {
	m := v.c.Modbus
	if len(m.UnitIDs) > maxModbusUnits {
		v.fail("modbus.unit_ids", "at most %d unit ids, not %d", maxModbusUnits, len(m.UnitIDs))
	}
	for i, id := range m.UnitIDs {
		if id < 0 || id > 255 {
			v.fail("modbus.unit_ids["+strconv.Itoa(i)+"]", "must be between 0 and 255, not %d", id)
		}
	}
	v.checkModbusUpstream()
	if len(m.Tags) > maxModbusTags {
		v.fail("modbus.tags", "at most %d tags, not %d", maxModbusTags, len(m.Tags))
		return
	}
	valid := make([]int, 0, len(m.Tags)) // indexes of tags valid on their own
	for i, t := range m.Tags {
		if v.checkModbusTag("modbus.tags["+strconv.Itoa(i)+"]", t) {
			valid = append(valid, i)
		}
	}
	slices.SortStableFunc(valid, func(a, b int) int {
		ta, tb := m.Tags[a], m.Tags[b]
		return cmp.Or(cmp.Compare(ta.Table, tb.Table), cmp.Compare(ta.Address, tb.Address))
	})
	for k := 1; k < len(valid); k++ {
		prev, cur := m.Tags[valid[k-1]], m.Tags[valid[k]]
		if prev.Table == cur.Table && prev.Address+modbusWidth[prev.Type] > cur.Address {
			v.fail("modbus.tags["+strconv.Itoa(valid[k])+"].address", "%s %d overlaps modbus.tags[%d] (%s at %d)",
				cur.Table, cur.Address, valid[k-1], prev.Type, prev.Address)
		}
	}
}

// checkModbusTag checks one tag and reports whether it is valid.
func (v *validator) checkModbusTag(at string, t ModbusTag) bool {
	n := len(v.problems)
	if t.Topic == "" || len(t.Topic) > maxModbusTopic || strings.ContainsAny(t.Topic, "+#") {
		v.fail(at+".topic", "must be a bus topic of 1 to %d bytes without + or #, not %q", maxModbusTopic, t.Topic)
	}
	v.oneOf(at+".table", t.Table, modbusTables)
	width, known := modbusWidth[t.Type]
	bits := t.Table == "coil" || t.Table == "discrete"
	switch {
	case !known:
		v.fail(at+".type", "must be one of bool | uint16 | int16 | uint32 | int32 | float32, not %q", t.Type)
	case bits != (t.Type == "bool"):
		v.fail(at+".type", "coils and discrete inputs are bool, registers are not: %s on %s", t.Type, t.Table)
	}
	if t.Address < 0 || t.Address+max(width, 1) > 1<<16 {
		v.fail(at+".address", "must leave the tag within 0..65535, not %d", t.Address)
	}
	if t.Scale < 0 || math.IsInf(t.Scale, 0) || math.IsNaN(t.Scale) || (bits && t.Scale != 0) {
		v.fail(at+".scale", "must be a positive factor for a register (0 = 1), not %v", t.Scale)
	}
	if t.Writable && (t.Table == "discrete" || t.Table == "input") {
		v.fail(at+".writable", "%s is read-only in Modbus; only coil and holding tags are writable", t.Table)
	}
	return len(v.problems) == n
}
