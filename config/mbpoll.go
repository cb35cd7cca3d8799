package config

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// ModbusPoll is an upstream device's polling: its tags read every
// interval, in reads coalesced within the limits (protocols/modbus/poll).
type ModbusPoll struct {
	Interval     time.Duration   `yaml:"interval"`      // between polls; 0s = not polled
	OnChange     bool            `yaml:"on_change"`     // publish a tag when it changes, not every poll
	MaxRegisters int             `yaml:"max_registers"` // registers per read, 1..125; 0 = 125
	MaxBits      int             `yaml:"max_bits"`      // coils or discrete inputs per read, 1..2000; 0 = 2000
	MaxGap       int             `yaml:"max_gap"`       // unused registers a read may bridge, 0..125
	Tags         []ModbusPollTag `yaml:"tags"`          // the tags read
}

// ModbusPollTag is one polled value, published on its topic.
type ModbusPollTag struct {
	Topic    string  `yaml:"topic"`    // bus topic, no wildcards
	Table    string  `yaml:"table"`    // coil | discrete | input | holding
	Address  int     `yaml:"address"`  // first coil or register, 0-based
	Type     string  `yaml:"type"`     // bool | uint16 | int16 | uint32 | int32 | uint64 | int64 | float32 | float64 | string
	Order    string  `yaml:"order"`    // ABCD | CDAB | BADC | DCBA; "" = ABCD
	Bit      int     `yaml:"bit"`      // bool on a register, or a uint16 bit field: its lowest bit, 0..15
	Bits     int     `yaml:"bits"`     // uint16 bit field width; 0 = the whole register
	Length   int     `yaml:"length"`   // string: registers, 1..123
	Scale    float64 `yaml:"scale"`    // value = raw x scale + offset; 0 = 1
	Offset   float64 `yaml:"offset"`   //
	Deadband float64 `yaml:"deadband"` // on_change: changes up to this are not published
	Writable bool    `yaml:"writable"` // a publish to topic (any protocol) writes the device; coil or whole holding registers
	ReadBack bool    `yaml:"readback"` // writable: a write is read back before its outcome is published
}

// Poll limits.
const (
	maxModbusPollTags = 10000 // per device
	minModbusInterval = 10 * time.Millisecond
)

var (
	modbusPollTypes  = []string{"bool", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float32", "float64", "string"}
	modbusPollOrders = []string{"", "ABCD", "CDAB", "BADC", "DCBA"}
	modbusPollWidth  = map[string]int{"bool": 1, "uint16": 1, "int16": 1, "uint32": 2, "int32": 2, "float32": 2,
		"uint64": 4, "int64": 4, "float64": 4}
)

// checkModbusPoll checks a device's polling and its tags.
func (v *validator) checkModbusPoll(at string, d ModbusDevice) {
	p := d.Poll
	if p.Interval != 0 && (p.Interval < minModbusInterval || p.Interval > 24*time.Hour) {
		v.fail(at+".interval", "must be 0s (not polled) or between %v and 24h, not %v", minModbusInterval, p.Interval)
	}
	if p.Interval != 0 && d.UnitID == 0 {
		v.fail(at+".interval", "a broadcast device (unit_id 0) cannot be read")
	}
	if p.MaxRegisters < 0 || p.MaxRegisters > 125 {
		v.fail(at+".max_registers", "must be between 0 (= 125) and 125, not %d", p.MaxRegisters)
	}
	if p.MaxBits < 0 || p.MaxBits > 2000 {
		v.fail(at+".max_bits", "must be between 0 (= 2000) and 2000, not %d", p.MaxBits)
	}
	if p.MaxGap < 0 || p.MaxGap > 125 {
		v.fail(at+".max_gap", "must be between 0 and 125, not %d", p.MaxGap)
	}
	if len(p.Tags) > maxModbusPollTags {
		v.fail(at+".tags", "at most %d tags, not %d", maxModbusPollTags, len(p.Tags))
		return
	}
	maxRegs := p.MaxRegisters
	if maxRegs == 0 {
		maxRegs = 125
	}
	for i, t := range p.Tags {
		v.checkModbusPollTag(at+".tags["+strconv.Itoa(i)+"]", t, maxRegs)
	}
}

// checkModbusPollTopics refuses a topic polled twice: its value has one
// source, and writes to it one device.
func (v *validator) checkModbusPollTopics(devs []ModbusDevice) {
	seen := map[string]bool{}
	for i, d := range devs {
		for j, t := range d.Poll.Tags {
			if seen[t.Topic] && t.Topic != "" {
				v.fail("modbus.upstream.devices["+strconv.Itoa(i)+"].poll.tags["+strconv.Itoa(j)+"].topic",
					"%q is already another polled tag's", t.Topic)
			}
			seen[t.Topic] = true
		}
	}
}

// checkModbusPollTag checks one polled tag; maxRegs is its device's
// registers per read, which a tag must fit in.
func (v *validator) checkModbusPollTag(at string, t ModbusPollTag, maxRegs int) {
	if t.Topic == "" || len(t.Topic) > maxModbusTopic || strings.ContainsAny(t.Topic, "+#") {
		v.fail(at+".topic", "must be a bus topic of 1 to %d bytes without + or #, not %q", maxModbusTopic, t.Topic)
	}
	v.oneOf(at+".table", t.Table, modbusTables)
	v.oneOf(at+".type", t.Type, modbusPollTypes)
	v.oneOf(at+".order", t.Order, modbusPollOrders)
	bits := t.Table == "coil" || t.Table == "discrete"
	width := modbusPollWidth[t.Type]
	switch {
	case bits && t.Type != "bool":
		v.fail(at+".type", "coils and discrete inputs are bool, not %s", t.Type)
	case bits:
		width = 1
	case t.Type == "string":
		width = t.Length
		if t.Length < 1 || t.Length > 123 {
			v.fail(at+".length", "a string is 1..123 registers, not %d", t.Length)
		}
	}
	if !bits && width > maxRegs {
		v.fail(at+".type", "%s covers %d registers, more than the device's max_registers %d", t.Type, width, maxRegs)
	}
	if t.Address < 0 || t.Address+max(width, 1) > 1<<16 {
		v.fail(at+".address", "must leave the tag within 0..65535, not %d", t.Address)
	}
	if t.Bit < 0 || t.Bit > 15 || t.Bits < 0 || t.Bit+t.Bits > 16 || (t.Bits > 0 && t.Type != "uint16") ||
		(t.Bit > 0 && t.Type != "bool" && t.Type != "uint16") || (bits && t.Bit != 0) {
		v.fail(at+".bit", "a bit field is bool (bit 0..15) or uint16 (bit + bits within 16) on a register, not bit %d bits %d on %s %s",
			t.Bit, t.Bits, t.Table, t.Type)
	}
	if t.Writable && t.Table != "coil" && (t.Table != "holding" || t.Type == "bool" || t.Bits > 0) {
		v.fail(at+".writable", "only a coil or a whole value in holding registers can be written, not %s %s (a bit of a register cannot be written alone)", t.Table, t.Type)
	}
	if t.Writable && (len(t.Topic)+len("/$result") > maxModbusTopic || strings.Count(t.Topic, "/")+1 >= 32) {
		v.fail(at+".topic", "a writable tag's topic leaves room for its result topic (<topic>/$result): at most %d bytes and 31 levels",
			maxModbusTopic-len("/$result"))
	}
	if t.ReadBack && !t.Writable {
		v.fail(at+".readback", "is for writable tags")
	}
	for key, f := range map[string]float64{"scale": t.Scale, "offset": t.Offset, "deadband": t.Deadband} {
		if math.IsNaN(f) || math.IsInf(f, 0) || (key != "offset" && f < 0) {
			v.fail(at+"."+key, "must be a finite number (scale and deadband not negative), not %v", f)
		}
	}
}
