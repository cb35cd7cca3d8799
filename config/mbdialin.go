package config

import (
	"net/netip"
	"slices"
	"strconv"
)

// Dial-in limits.
const (
	maxDialInDevices   = 4096
	maxDialInIDNumber  = 4  // registers of a numeric identity (a uint64)
	maxDialInIDStrings = 16 // registers of a string identity (32 characters)
)

// checkDialIn checks modbus.upstream.dial_in: the probe, how its answer
// names a device, and that the dial-in lines fit max_devices.
func (v *validator) checkDialIn() {
	d := v.c.Modbus.Upstream.DialIn
	const at = "modbus.upstream.dial_in"
	if d == (ModbusDialIn{}) && !v.hasDialInLines() {
		return // a section built in code without dial-in lines: nothing to check
	}
	p := d.Probe
	if p.UnitID < 0 || p.UnitID > 255 {
		v.fail(at+".probe.unit_id", "must be between 0 and 255, not %d", p.UnitID)
	}
	if p.Function != 3 && p.Function != 4 {
		v.fail(at+".probe.function", "must be 3 (holding registers) or 4 (input registers), not %d", p.Function)
	}
	v.oneOf(at+".identify_by", d.IdentifyBy, []string{"register", "source"})
	v.oneOf(at+".id_format", d.IDFormat, []string{"number", "string"})
	most := maxDialInIDNumber
	if d.IDFormat == "string" {
		most = maxDialInIDStrings
	}
	if p.Count < 1 || p.Count > most {
		v.fail(at+".probe.count", "must be 1..%d registers for id_format %s, not %d", most, d.IDFormat, p.Count)
	}
	if p.Address < 0 || p.Address+p.Count > 65536 {
		v.fail(at+".probe.address", "must be 0..65535 with the count's registers after it, not %d", p.Address)
	}
	if d.MaxDevices < 1 || d.MaxDevices > maxDialInDevices {
		v.fail(at+".max_devices", "must be between 1 and %d, not %d", maxDialInDevices, d.MaxDevices)
		return
	}
	if v.hasDialInLines() && !v.probesModbus() {
		v.fail("sniff.probe", "dial-in lines need the silent peers probed: name a pool that takes modbus and nothing else, not %q", v.c.Sniff.Probe)
	}
	if n := v.dialInLines(); n > d.MaxDevices {
		v.fail(at+".max_devices", "is %d, but %d lines are dial-in", d.MaxDevices, n)
	}
}

// checkDialInLine checks one dial-in line: no address, an identity in
// the form identify_by asks for, no other line's.
func (v *validator) checkDialInLine(at string, i int, l ModbusLine, identities map[string]int) {
	d := v.c.Modbus.Upstream.DialIn
	if l.Address != "" {
		v.fail(at+".address", "a dial-in line has none: its device connects to the shared port")
	}
	id := l.Identity
	switch {
	case id == "":
		v.fail(at+".identity", "a dial-in line needs the identity its device answers the probe with (or its source IP)")
		return
	case d.IdentifyBy == "source":
		a, err := netip.ParseAddr(id)
		if err != nil {
			v.fail(at+".identity", "identify_by source: must be an IP address, not %q", id)
			return
		}
		id = a.Unmap().String()
	case d.IDFormat == "number":
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil || (d.Probe.Count < 4 && n>>(16*d.Probe.Count) != 0) {
			v.fail(at+".identity", "id_format number: must be an unsigned number that fits %d register(s), not %q", d.Probe.Count, id)
			return
		}
		id = strconv.FormatUint(n, 10)
	case len(id) > 2*d.Probe.Count:
		v.fail(at+".identity", "id_format string: at most %d characters (probe.count registers), not %q", 2*d.Probe.Count, id)
		return
	}
	if j, dup := identities[id]; dup {
		v.fail(at+".identity", "%q is already modbus.upstream.lines[%d]'s", l.Identity, j)
		return
	}
	identities[id] = i
}

// dialInLines counts the lines of kind dial-in.
func (v *validator) dialInLines() int {
	n := 0
	for _, l := range v.c.Modbus.Upstream.Lines {
		if l.Kind == "dial-in" {
			n++
		}
	}
	return n
}

func (v *validator) hasDialInLines() bool { return v.dialInLines() > 0 }

// probesModbus reports whether sniff.probe names a pool that takes modbus
// and nothing else (its protocols, or by default its own name).
func (v *validator) probesModbus() bool {
	p, ok := v.c.Pools[v.c.Sniff.Probe]
	if !ok {
		return false
	}
	if len(p.Protocols) == 0 {
		return v.c.Sniff.Probe == "modbus"
	}
	// The gateway probes with the pool's handlers, all of which must
	// probe: modbus is the only one that does.
	return len(slices.Compact(slices.Clone(p.Protocols))) == 1 && p.Protocols[0] == "modbus"
}
