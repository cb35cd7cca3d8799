package poll

import (
	"fmt"
	"testing"
)

func TestPlan(t *testing.T) {
	h := func(addr int, typ Type) Tag { return Tag{Table: Holding, Address: addr, Type: typ} }
	coil := func(addr int) Tag { return Tag{Table: Coil, Address: addr, Type: Bool} }
	tests := []struct {
		name string
		tags []Tag
		lim  Limits
		want string // reads as table:start+count[tags]
	}{
		{"adjacent join", []Tag{h(0, U16), h(1, F32), h(3, U16)}, Limits{}, "3:0+4[0 1 2]"},
		{"order does not matter", []Tag{h(3, U16), h(0, U16), h(1, F32)}, Limits{}, "3:0+4[1 2 0]"},
		{"a gap splits without max_gap", []Tag{h(0, U16), h(2, U16)}, Limits{}, "3:0+1[0] 3:2+1[1]"},
		{"max_gap bridges it", []Tag{h(0, U16), h(2, U16)}, Limits{MaxGap: 1}, "3:0+3[0 1]"},
		{"but not a wider one", []Tag{h(0, U16), h(3, U16)}, Limits{MaxGap: 1}, "3:0+1[0] 3:3+1[1]"},
		{"bit fields share a register", []Tag{{Table: Holding, Type: Bool, Bit: 1}, {Table: Holding, Type: Bool, Bit: 2}, {Table: Holding, Type: U16, Bit: 4, Bits: 4}},
			Limits{}, "3:0+1[0 1 2]"},
		{"max registers split", []Tag{h(0, U64), h(4, U64), h(8, U64)}, Limits{MaxRegisters: 8}, "3:0+8[0 1] 3:8+4[2]"},
		{"a tag never straddles", []Tag{h(0, U16), h(1, U32)}, Limits{MaxRegisters: 2}, "3:0+1[0] 3:1+2[1]"},
		{"tables apart", []Tag{{Table: Input, Address: 0, Type: U16}, h(0, U16), coil(0)},
			Limits{}, "1:0+1[2] 3:0+1[1] 4:0+1[0]"},
		{"coils bridge 16 bits per gap register", []Tag{coil(0), coil(17), coil(40)}, Limits{MaxGap: 1}, "1:0+18[0 1] 1:40+1[2]"},
		{"max bits", []Tag{coil(0), coil(1), coil(2)}, Limits{MaxBits: 2}, "1:0+2[0 1] 1:2+1[2]"},
		{"invalid tags left out", []Tag{{Table: Coil, Type: U16}, h(0, U16)}, Limits{}, "3:0+1[1]"},
		{"defaults are the protocol's", []Tag{h(0, U16), h(124, U16), h(125, U16)}, Limits{MaxGap: 200, MaxRegisters: 999}, "3:0+125[0 1] 3:125+1[2]"},
		{"none", nil, Limits{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			for i, r := range Plan(tt.tags, tt.lim) {
				if i > 0 {
					got += " "
				}
				got += fmt.Sprintf("%d:%d+%d%v", r.Table, r.Start, r.Count, r.Tags)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPlanCovers: over many generated tag sets, every valid tag lies
// inside exactly one read of its table, and reads stay within limits.
func TestPlanCovers(t *testing.T) {
	types := []Type{U16, I32, F64, Bool, String}
	for seed := range 500 {
		var tags []Tag
		x := uint32(seed)*2654435761 + 1
		next := func(n int) int { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return int(x % uint32(n)) }
		for range 1 + next(40) {
			tb := Table(1 + next(4))
			tag := Tag{Table: tb, Address: next(600), Type: types[next(len(types))], Length: 1 + next(20)}
			if tb.Bits() {
				tag.Type = Bool
			}
			tags = append(tags, tag)
		}
		lim := Limits{MaxRegisters: 20 + next(106), MaxBits: 1 + next(2000), MaxGap: next(5)}
		seen := make([]int, len(tags))
		for _, r := range Plan(tags, lim) {
			limit := lim.MaxRegisters
			if r.Table.Bits() {
				limit = lim.MaxBits
			}
			if r.Count > limit || r.Count < 1 {
				t.Fatalf("seed %d: read %+v over its limit %d", seed, r, limit)
			}
			for _, i := range r.Tags {
				tg := tags[i]
				if tg.Table != r.Table || tg.Address < r.Start || tg.Address+tg.Width() > r.Start+r.Count {
					t.Fatalf("seed %d: tag %+v outside read %+v", seed, tg, r)
				}
				seen[i]++
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("seed %d: tag %+v in %d reads", seed, tags[i], n)
			}
		}
	}
}
