package gateway

import (
	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/modbus/poll"
	"github.com/edgemux/edgemux/protocols/modbus/upstream"
)

// pollDevices is the polling of every upstream device with an interval,
// on the device set's own lines (one request in flight each, shared
// with gateway mode). The configuration is validated: names parse.
func pollDevices(cfg config.ModbusUpstream, set *upstream.Set) []poll.Device {
	byName := map[string]*upstream.Device{}
	for _, d := range set.Devices() {
		byName[d.Name()] = d
	}
	var out []poll.Device
	for _, dc := range cfg.Devices {
		dev := byName[dc.Name]
		if dc.Poll.Interval <= 0 || dev == nil {
			continue
		}
		p := poll.Device{Dev: dev, Interval: dc.Poll.Interval, OnChange: dc.Poll.OnChange,
			Limits: poll.Limits{MaxRegisters: dc.Poll.MaxRegisters, MaxBits: dc.Poll.MaxBits, MaxGap: dc.Poll.MaxGap},
			Tags:   make([]poll.PolledTag, 0, len(dc.Poll.Tags))}
		for _, tc := range dc.Poll.Tags {
			table, _ := poll.ParseTable(tc.Table)
			typ, _ := poll.ParseType(tc.Type)
			order, _ := poll.ParseOrder(tc.Order)
			p.Tags = append(p.Tags, poll.PolledTag{Deadband: tc.Deadband, Tag: poll.Tag{Topic: tc.Topic, Table: table,
				Address: tc.Address, Type: typ, Order: order, Bit: tc.Bit, Bits: tc.Bits, Length: tc.Length,
				Scale: tc.Scale, Offset: tc.Offset}, Writable: tc.Writable, ReadBack: tc.ReadBack})
		}
		out = append(out, p)
	}
	return out
}
