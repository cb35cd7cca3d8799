package upstream

import (
	"log/slog"
	"net/netip"
	"strconv"

	"github.com/edgemux/edgemux/config"
)

// Set is the configured lines and devices (modbus.upstream), built once:
// lines hold connections and goroutines, so the section needs a restart
// rather than a reload.
type Set struct {
	lines     []*Line
	devices   []*Device
	byGateway [256]*Device     // by gateway_unit; [0] stays nil
	dialIn    map[string]*Line // dial-in lines by identity (the canonical form DialInLine looks up)
}

// Build makes the lines and devices of a validated configuration; they
// start nothing until Start.
func Build(cfg config.ModbusUpstream, log *slog.Logger) *Set {
	s := &Set{}
	byName := map[string]*Line{}
	for _, lc := range cfg.Lines {
		l := NewLine(LineConfig{Name: lc.Name, Kind: Kind(lc.Kind), Address: lc.Address, Baud: lc.Baud,
			DataBits: lc.DataBits, Parity: lc.Parity, StopBits: lc.StopBits, Queue: lc.Queue}, log)
		byName[lc.Name] = l
		s.lines = append(s.lines, l)
		if l.cfg.Kind == KindDialIn {
			if s.dialIn == nil {
				s.dialIn = map[string]*Line{}
			}
			s.dialIn[CanonicalIdentity(lc.Identity)] = l
		}
	}
	for _, dc := range cfg.Devices {
		l := byName[dc.Line]
		if l == nil {
			continue // config.Validate refuses this
		}
		d := l.AddDevice(DeviceConfig{Name: dc.Name, Unit: byte(dc.UnitID), Timeout: dc.Timeout, Retries: dc.Retries,
			Backoff: dc.Backoff, Delay: dc.Delay, ConnectDelay: dc.ConnectDelay, DemoteAfter: dc.DemoteAfter, ProbeEvery: dc.ProbeEvery})
		s.devices = append(s.devices, d)
		if dc.GatewayUnit > 0 && dc.GatewayUnit < 256 {
			s.byGateway[dc.GatewayUnit] = d
		}
	}
	return s
}

// Start starts every line.
func (s *Set) Start() {
	for _, l := range s.lines {
		l.Start()
	}
}

// Close closes every line; queued requests fail with ErrClosed.
func (s *Set) Close() {
	for _, l := range s.lines {
		l.Close()
	}
}

// ForGatewayUnit is the device masters reach as unit id u, or nil.
func (s *Set) ForGatewayUnit(u byte) *Device {
	if s == nil {
		return nil
	}
	return s.byGateway[u]
}

// DialInLine is the dial-in line whose device has identity id (in any
// form CanonicalIdentity accepts), or nil.
func (s *Set) DialInLine(id string) *Line {
	if s == nil {
		return nil
	}
	return s.dialIn[CanonicalIdentity(id)]
}

// HasDialIn reports whether any line is dial-in.
func (s *Set) HasDialIn() bool { return s != nil && len(s.dialIn) > 0 }

// CanonicalIdentity is the form identities are compared in: an IP
// address as netip prints it (IPv4-mapped IPv6 unmapped), a decimal
// number without leading zeros, anything else as it is.
func CanonicalIdentity(id string) string {
	if a, err := netip.ParseAddr(id); err == nil {
		return a.Unmap().String()
	}
	if n, err := strconv.ParseUint(id, 10, 64); err == nil {
		return strconv.FormatUint(n, 10)
	}
	return id
}

// Devices lists the devices in configuration order.
func (s *Set) Devices() []*Device {
	if s == nil {
		return nil
	}
	return s.devices
}

// Health snapshots every device's health, in configuration order.
func (s *Set) Health() []Health {
	out := make([]Health, 0, len(s.Devices()))
	for _, d := range s.Devices() {
		out = append(out, d.Health())
	}
	return out
}
