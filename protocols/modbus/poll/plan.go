package poll

import (
	"cmp"
	"slices"
)

// Limits shape the requests a device's tags are read with.
type Limits struct {
	MaxRegisters int // registers per read request, 1..125 (default 125)
	MaxBits      int // coils or discrete inputs per read request, 1..2000 (default 2000)
	// MaxGap is how many unused registers a request may read to join
	// two tags into one request (Telegraf's max_insert); 0 joins only
	// adjacent or overlapping tags. Coils and discrete inputs bridge 16
	// bits per register of gap. A device that has no register in the
	// gap answers the whole request with exception 0x02: set it 0 there.
	MaxGap int
}

// The protocol's limits (Modbus Application Protocol §6.1-6.4).
const (
	maxReadRegisters = 125
	maxReadBits      = 2000
)

func (l Limits) withDefaults() Limits {
	if l.MaxRegisters <= 0 || l.MaxRegisters > maxReadRegisters {
		l.MaxRegisters = maxReadRegisters
	}
	if l.MaxBits <= 0 || l.MaxBits > maxReadBits {
		l.MaxBits = maxReadBits
	}
	l.MaxGap = max(l.MaxGap, 0)
	return l
}

// Read is one read request of a plan: Count coils or registers of Table
// from Start, covering the tags listed (indexes into the planned slice).
type Read struct {
	Table Table
	Start int
	Count int
	Tags  []int
}

// PDU is the read request's PDU.
func (r Read) PDU() []byte {
	return []byte{byte(r.Table), byte(r.Start >> 8), byte(r.Start), byte(r.Count >> 8), byte(r.Count)}
}

// Plan coalesces tags into as few reads as lim allows: per table, in
// address order, each read extended over the next tag while the gap to
// it is at most MaxGap and the read stays within its maximum. Extending
// greedily is optimal for points on a line covered by spans of bounded
// length. A tag wider than a read (which Check and the configuration
// refuse) gets a read of its own. Tags failing Check are left out.
func Plan(tags []Tag, lim Limits) []Read {
	lim = lim.withDefaults()
	order := make([]int, 0, len(tags))
	for i, t := range tags {
		if t.Check() == nil {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(tags[a].Table, tags[b].Table), cmp.Compare(tags[a].Address, tags[b].Address))
	})
	var reads []Read
	end := 0 // of the last read, exclusive
	for _, i := range order {
		t := tags[i]
		limit, gap := lim.MaxRegisters, lim.MaxGap
		if t.Table.Bits() {
			limit, gap = lim.MaxBits, 16*lim.MaxGap
		}
		tEnd := t.Address + t.Width()
		if n := len(reads); n > 0 {
			r := &reads[n-1]
			newEnd := max(end, tEnd)
			if r.Table == t.Table && t.Address-end <= gap && newEnd-r.Start <= limit {
				r.Tags = append(r.Tags, i)
				end = newEnd
				r.Count = end - r.Start
				continue
			}
		}
		reads = append(reads, Read{Table: t.Table, Start: t.Address, Count: t.Width(), Tags: []int{i}})
		end = tEnd
	}
	return reads
}
