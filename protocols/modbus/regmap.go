package modbus

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
)

// Tables of the data model, indexes of Map.tables.
const (
	coils = iota
	discreteInputs
	inputRegisters
	holdingRegisters
	tables
)

var tableIndex = map[string]int{"coil": coils, "discrete": discreteInputs, "input": inputRegisters, "holding": holdingRegisters}

// valueType is how a tag's value is laid out in its coil or registers.
type valueType uint8

const (
	typeBool valueType = iota
	typeUint16
	typeInt16
	typeUint32
	typeInt32
	typeFloat32
)

var typeIndex = map[string]valueType{
	"bool": typeBool, "uint16": typeUint16, "int16": typeInt16,
	"uint32": typeUint32, "int32": typeInt32, "float32": typeFloat32,
}

// tag is one configured tag, ready to serve.
type tag struct {
	topic    string
	address  int // first coil or register
	width    int // coils or registers it covers
	typ      valueType
	scale    float64 // register = value x scale
	writable bool
}

func (t *tag) end() int { return t.address + t.width }

// Map is the register map: for each table, its tags sorted by address.
// It is immutable once built; Reload builds a new one.
type Map struct {
	tables [tables][]tag
}

// NewMap builds the map from a validated configuration (config.Validate
// checked the words, the ranges and that no two tags of a table overlap).
func NewMap(tags []config.ModbusTag) *Map {
	m := &Map{}
	for _, c := range tags {
		t := tag{topic: c.Topic, address: c.Address, width: config.ModbusWidth(c.Type),
			typ: typeIndex[c.Type], scale: c.Scale, writable: c.Writable}
		if t.scale == 0 {
			t.scale = 1
		}
		i := tableIndex[c.Table]
		m.tables[i] = append(m.tables[i], t)
	}
	for i := range m.tables {
		slices.SortFunc(m.tables[i], func(a, b tag) int { return a.address - b.address })
	}
	return m
}

// span returns the tags of table that cover addresses [addr, addr+qty)
// without a gap, or false if an address in between is not mapped.
func (m *Map) span(table, addr, qty int) ([]tag, bool) {
	ts := m.tables[table]
	i, _ := slices.BinarySearchFunc(ts, addr, func(t tag, a int) int { return t.end() - 1 - a })
	j, next := i, addr
	for ; j < len(ts) && next < addr+qty; j++ {
		if ts[j].address > next {
			return nil, false
		}
		next = ts[j].end()
	}
	if next < addr+qty {
		return nil, false
	}
	return ts[i:j], true
}

// errValue is a bus value a tag's type cannot carry: not a number (or a
// boolean, for a coil), or out of the type's range once scaled.
var errValue = errors.New("modbus: value does not fit the tag")

// errNoValue is a tag with no current value: never published, or older
// than the configured max age.
var errNoValue = errors.New("modbus: tag has no current value")

// values reads tags' last values from the bus for one request.
type values struct {
	bus    *bus.Bus
	now    int64 // unix nanoseconds, the bus's clock
	maxAge int64 // nanoseconds; 0: values never go stale
	zero   bool  // no_value: zero; a missing or stale value reads as 0
}

// exception is the exception a tag's read error answers, and whether
// the read may go on (a missing value under no_value: zero).
func (v *values) exception(err error) (byte, bool) {
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, errNoValue) && v.zero:
		return 0, true
	case errors.Is(err, errNoValue), errors.Is(err, errQuality):
		// A polled value that is stale or bad is 0x0B even under
		// no_value: zero: the device said it has no value.
		return GatewayTargetFailed, false
	}
	return ServerDeviceFailure, false
}

// read appends what a read function asks for: packed bits from the coils
// or discrete inputs, registers from the holding or input registers.
func (m *Map) read(v *values, function byte, addr, qty int, dst []byte) ([]byte, byte) {
	switch function {
	case ReadCoils:
		return m.readBits(v, coils, addr, qty, dst)
	case ReadDiscreteInputs:
		return m.readBits(v, discreteInputs, addr, qty, dst)
	case ReadInputRegisters:
		return m.readRegisters(v, inputRegisters, addr, qty, dst)
	}
	return m.readRegisters(v, holdingRegisters, addr, qty, dst)
}

// readBits packs the coils or discrete inputs [addr, addr+qty) into dst,
// first coil in the lowest bit.
func (m *Map) readBits(v *values, table, addr, qty int, dst []byte) ([]byte, byte) {
	ts, ok := m.span(table, addr, qty)
	if !ok {
		return dst, IllegalDataAddress
	}
	start := len(dst)
	dst = append(dst, make([]byte, (qty+7)/8)...)
	for k := range ts {
		on, err := v.boolValue(&ts[k])
		if exc, ok := v.exception(err); !ok {
			return dst[:start], exc
		}
		if bit := ts[k].address - addr; on {
			dst[start+bit/8] |= 1 << (bit % 8)
		}
	}
	return dst, 0
}

// readRegisters appends registers [addr, addr+qty) to dst, big-endian. A
// range may start or end inside a 32-bit tag: masters read such values
// one register at a time too.
func (m *Map) readRegisters(v *values, table, addr, qty int, dst []byte) ([]byte, byte) {
	ts, ok := m.span(table, addr, qty)
	if !ok {
		return dst, IllegalDataAddress
	}
	start := len(dst)
	for k := range ts {
		t := &ts[k]
		var words [2]uint16
		if exc, ok := v.exception(v.registerValue(t, words[:t.width])); !ok {
			return dst[:start], exc
		}
		for w := range t.width {
			if a := t.address + w; a >= addr && a < addr+qty {
				dst = binary.BigEndian.AppendUint16(dst, words[w])
			}
		}
	}
	return dst, 0
}

// text is the tag's cached bus value as text, or errNoValue while the
// topic has none or its value is older than maxAge.
func (v *values) text(t *tag) (string, error) {
	m, ok := v.bus.Get(t.topic)
	if !ok || (v.maxAge > 0 && v.now-m.TS > v.maxAge) {
		return "", errNoValue
	}
	text := strings.TrimSpace(string(m.Payload))
	if strings.HasPrefix(text, "{") {
		return sampleValue(text)
	}
	return text, nil
}

// errQuality is a polled value its poller marked stale or bad
// (protocols/modbus/poll): the device did not answer or has no value.
var errQuality = errors.New("modbus: polled value is not good")

// sampleValue is "v" of a JSON object payload, the shape the poller
// publishes ({"v":1.5,"q":"good","ts":...}), as text: a quality other
// than good is errQuality, never the last value or a zero.
func sampleValue(text string) (string, error) {
	var s struct {
		V json.RawMessage `json:"v"`
		Q *string         `json:"q"`
	}
	if json.Unmarshal([]byte(text), &s) != nil || len(s.V) == 0 {
		return "", errValue
	}
	if s.Q != nil && *s.Q != "good" {
		return "", errQuality
	}
	if s.V[0] == '"' {
		var str string
		if json.Unmarshal(s.V, &str) != nil {
			return "", errValue
		}
		return str, nil
	}
	if string(s.V) == "null" {
		return "", errQuality
	}
	return string(s.V), nil
}

// boolValue reads a coil or discrete input: true/false, on/off, or a
// number (0 is false). No current value is errNoValue (and false).
func (v *values) boolValue(t *tag) (bool, error) {
	text, err := v.text(t)
	if err != nil {
		return false, err
	}
	switch strings.ToLower(text) {
	case "true", "on":
		return true, nil
	case "false", "off":
		return false, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(f) {
		return false, errValue
	}
	return f != 0, nil
}

// registerValue encodes the tag's value (x scale) into its registers, high
// word first. No current value is errNoValue (and zeros).
func (v *values) registerValue(t *tag, words []uint16) error {
	text, err := v.text(t)
	if err != nil {
		clear(words)
		return err
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(f) {
		return errValue
	}
	x := f * t.scale
	if t.typ == typeFloat32 {
		if math.Abs(x) > math.MaxFloat32 {
			return errValue
		}
		bits := math.Float32bits(float32(x))
		words[0], words[1] = uint16(bits>>16), uint16(bits)
		return nil
	}
	r := math.Round(x)
	lo, hi := typeRange(t.typ)
	if r < lo || r > hi {
		return errValue
	}
	switch t.typ {
	case typeUint16:
		words[0] = uint16(r)
	case typeInt16:
		words[0] = uint16(int16(r))
	case typeUint32:
		words[0], words[1] = uint16(uint32(r)>>16), uint16(uint32(r))
	case typeInt32:
		u := uint32(int32(r))
		words[0], words[1] = uint16(u>>16), uint16(u)
	}
	return nil
}

// typeRange is the range of an integer type.
func typeRange(t valueType) (lo, hi float64) {
	switch t {
	case typeUint16:
		return 0, math.MaxUint16
	case typeInt16:
		return math.MinInt16, math.MaxInt16
	case typeUint32:
		return 0, math.MaxUint32
	}
	return math.MinInt32, math.MaxInt32
}

// writeBits checks a write of coils [addr, addr+qty) (values packed, first
// coil in the lowest bit) and returns the bus values it makes, or the
// exception to answer. Nothing is published unless all of it is valid.
func (m *Map) writeBits(addr, qty int, values []byte) ([]update, byte) {
	ts, ok := m.span(coils, addr, qty)
	if !ok {
		return nil, IllegalDataAddress
	}
	ups := make([]update, 0, len(ts))
	for k := range ts {
		if !ts[k].writable {
			return nil, IllegalDataAddress
		}
		bit := ts[k].address - addr
		text := "false"
		if values[bit/8]&(1<<(bit%8)) != 0 {
			text = "true"
		}
		ups = append(ups, update{ts[k].topic, text})
	}
	return ups, 0
}

// writeRegisters checks a write of holding registers [addr, addr+qty)
// (big-endian words) and returns the bus values it makes. It must cover
// whole tags: half of a 32-bit value means nothing.
func (m *Map) writeRegisters(addr, qty int, words []byte) ([]update, byte) {
	ts, ok := m.span(holdingRegisters, addr, qty)
	if !ok || ts[0].address != addr || ts[len(ts)-1].end() != addr+qty {
		return nil, IllegalDataAddress
	}
	ups := make([]update, 0, len(ts))
	for k := range ts {
		t := &ts[k]
		if !t.writable {
			return nil, IllegalDataAddress
		}
		w := words[2*(t.address-addr):]
		ups = append(ups, update{t.topic, formatRegisters(t, w)})
	}
	return ups, 0
}

// formatRegisters is the bus text of a tag's registers w (value / scale).
func formatRegisters(t *tag, w []byte) string {
	var v float64
	switch t.typ {
	case typeUint16:
		v = float64(binary.BigEndian.Uint16(w))
	case typeInt16:
		v = float64(int16(binary.BigEndian.Uint16(w)))
	case typeUint32:
		v = float64(binary.BigEndian.Uint32(w))
	case typeInt32:
		v = float64(int32(binary.BigEndian.Uint32(w)))
	case typeFloat32:
		f := math.Float32frombits(binary.BigEndian.Uint32(w))
		return strconv.FormatFloat(float64(f)/t.scale, 'g', -1, 32)
	}
	return strconv.FormatFloat(v/t.scale, 'g', -1, 64)
}

// update is one value a write puts on the bus.
type update struct {
	topic, text string
}
