package config

import (
	"strconv"
	"time"
)

// ModbusUpstream is edgemux as the master of devices that never connect
// to anyone: the lines that reach them and the devices on those lines
// (protocols/modbus/upstream).
type ModbusUpstream struct {
	Lines   []ModbusLine   `yaml:"lines"`   // paths to devices
	Devices []ModbusDevice `yaml:"devices"` // devices on the lines
	DialIn  ModbusDialIn   `yaml:"dial_in"` // how devices that connect and stay silent are identified (lines of kind dial-in)
}

// ModbusDialIn is how a silent peer on the shared port (sniff.probe naming
// the modbus pool) is asked who it is: the probe read, and what in its
// answer names one of the dial-in lines.
type ModbusDialIn struct {
	Probe      ModbusProbe `yaml:"probe"`       // the read request sent to a silent peer
	IdentifyBy string      `yaml:"identify_by"` // register (the probe's answer) | source (the peer's IP address)
	IDFormat   string      `yaml:"id_format"`   // identify_by register: number (unsigned, big-endian) | string (two characters a register)
	MaxDevices int         `yaml:"max_devices"` // dial-in lines configured, and so dial-in devices connected, at most
}

// ModbusProbe is the read a silent peer is asked.
type ModbusProbe struct {
	UnitID   int `yaml:"unit_id"`  // unit id of the request
	Function int `yaml:"function"` // 3 (holding registers) | 4 (input registers)
	Address  int `yaml:"address"`  // first register, 0-based
	Count    int `yaml:"count"`    // registers: 1..4 for a number, 1..16 for a string
}

// ModbusLine is one path to upstream devices, with one request in flight.
type ModbusLine struct {
	Name     string `yaml:"name"`      // referred to by devices[].line
	Kind     string `yaml:"kind"`      // tcp | rtu | rtu-over-tcp
	Address  string `yaml:"address"`   // host:port (tcp, rtu-over-tcp) or a serial device path (rtu)
	Baud     int    `yaml:"baud"`      // rtu, rtu-over-tcp: serial speed; 0 = 9600
	DataBits int    `yaml:"data_bits"` // 7 | 8; 0 = 8
	Parity   string `yaml:"parity"`    // N | E | O; "" = E
	StopBits int    `yaml:"stop_bits"` // 1 | 2; 0 = 1
	Queue    int    `yaml:"queue"`     // requests waiting on the line; 0 = 64
	Identity string `yaml:"identity"`  // dial-in: the id its probe answer gives (a number or string), or its source IP
}

// ModbusDevice is one upstream device. Zero durations and counts take
// the defaults the README lists.
type ModbusDevice struct {
	Name         string        `yaml:"name"`          // for metrics and logs
	Line         string        `yaml:"line"`          // lines[].name
	UnitID       int           `yaml:"unit_id"`       // the device's unit id (0 = broadcast, writes only)
	GatewayUnit  int           `yaml:"gateway_unit"`  // unit id masters on the shared port use for it; 0 = not forwarded
	Timeout      time.Duration `yaml:"timeout"`       // TCP: response timeout; RTU: margin over the frames' wire time
	Retries      int           `yaml:"retries"`       // attempts after the first
	Backoff      time.Duration `yaml:"backoff"`       // before the first retry, doubled after each
	Delay        time.Duration `yaml:"delay"`         // line silence after each request to it
	ConnectDelay time.Duration `yaml:"connect_delay"` // after connecting, before the first request
	DemoteAfter  int           `yaml:"demote_after"`  // failed requests in a row that demote it
	ProbeEvery   time.Duration `yaml:"probe_every"`   // a demoted device gets one request this often
	Poll         ModbusPoll    `yaml:"poll"`          // its tags polled (mbpoll.go); none by default
}

// Upstream limits.
const (
	maxModbusLines   = maxModbusDevices // a Modbus TCP device is a line of its own
	maxModbusDevices = 4096
	maxModbusRetries = 10
)

var modbusLineKinds = []string{"tcp", "rtu", "rtu-over-tcp", "dial-in"}

// checkModbusUpstream checks the lines and devices: kinds and serial
// settings, names unique, every device on a known line, gateway units
// unique and not answered by the register map's own unit ids.
func (v *validator) checkModbusUpstream() {
	u := v.c.Modbus.Upstream
	if len(u.Lines) > maxModbusLines || len(u.Devices) > maxModbusDevices {
		v.fail("modbus.upstream", "at most %d lines and %d devices, not %d and %d", maxModbusLines, maxModbusDevices, len(u.Lines), len(u.Devices))
		return
	}
	v.checkDialIn()
	lines, identities := map[string]bool{}, map[string]int{}
	for i, l := range u.Lines {
		at := "modbus.upstream.lines[" + strconv.Itoa(i) + "]"
		if l.Name == "" || lines[l.Name] {
			v.fail(at+".name", "must be a name no other line has, not %q", l.Name)
		}
		lines[l.Name] = true
		v.oneOf(at+".kind", l.Kind, modbusLineKinds)
		switch {
		case l.Kind == "dial-in":
			v.checkDialInLine(at, i, l, identities)
		case l.Address == "":
			v.fail(at+".address", "must be host:port (tcp, rtu-over-tcp) or a serial device path (rtu)")
		case l.Identity != "":
			v.fail(at+".identity", "only a dial-in line has an identity")
		}
		v.checkModbusSerial(at, l)
		if l.Queue < 0 || l.Queue > 65536 {
			v.fail(at+".queue", "must be between 0 (= 64) and 65536, not %d", l.Queue)
		}
	}
	names, units := map[string]bool{}, map[int]int{}
	for i, d := range u.Devices {
		at := "modbus.upstream.devices[" + strconv.Itoa(i) + "]"
		if d.Name == "" || names[d.Name] {
			v.fail(at+".name", "must be a name no other device has, not %q", d.Name)
		}
		names[d.Name] = true
		if !lines[d.Line] {
			v.fail(at+".line", "must name one of modbus.upstream.lines, not %q", d.Line)
		}
		if d.UnitID < 0 || d.UnitID > 247 {
			v.fail(at+".unit_id", "must be between 0 (broadcast) and 247, not %d", d.UnitID)
		}
		if d.GatewayUnit < 0 || d.GatewayUnit > 255 {
			v.fail(at+".gateway_unit", "must be between 0 (not forwarded) and 255, not %d", d.GatewayUnit)
		} else if j, dup := units[d.GatewayUnit]; dup && d.GatewayUnit != 0 {
			v.fail(at+".gateway_unit", "%d is already modbus.upstream.devices[%d]'s", d.GatewayUnit, j)
		}
		units[d.GatewayUnit] = i
		if d.Retries < 0 || d.Retries > maxModbusRetries || d.DemoteAfter < 0 || d.DemoteAfter > 1000 {
			v.fail(at+".retries", "retries must be 0..%d and demote_after 0..1000, not %d and %d", maxModbusRetries, d.Retries, d.DemoteAfter)
		}
		for key, dur := range map[string]time.Duration{"timeout": d.Timeout, "backoff": d.Backoff, "delay": d.Delay,
			"connect_delay": d.ConnectDelay, "probe_every": d.ProbeEvery} {
			if dur < 0 || dur > time.Hour {
				v.fail(at+"."+key, "must be between 0s (the default) and 1h, not %v", dur)
			}
		}
		v.checkModbusPoll(at+".poll", d)
	}
	v.checkModbusPollTopics(u.Devices)
}

// checkModbusSerial checks a line's serial settings.
func (v *validator) checkModbusSerial(at string, l ModbusLine) {
	switch l.Baud {
	case 0, 1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400:
	default:
		v.fail(at+".baud", "must be one of 1200 .. 230400 (a standard rate), not %d", l.Baud)
	}
	if l.DataBits != 0 && l.DataBits != 7 && l.DataBits != 8 {
		v.fail(at+".data_bits", "must be 7 or 8, not %d", l.DataBits)
	}
	if l.Parity != "" {
		v.oneOf(at+".parity", l.Parity, []string{"N", "E", "O"})
	}
	if l.StopBits != 0 && l.StopBits != 1 && l.StopBits != 2 {
		v.fail(at+".stop_bits", "must be 1 or 2, not %d", l.StopBits)
	}
}
