package quarantine

import (
	"net/netip"
	"slices"
	"testing"
)

func addrOf(i byte) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, i}) }

// op is one step on an addrList: push (at = value), remove, or drop up to.
type op struct {
	kind byte // 'p' push, 'r' remove, 'd' dropUpTo
	addr byte
	at   int64
}

func TestAddrList(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		ops   []op
		want  []byte // addresses front to back
	}{
		{"empty", 3, nil, nil},
		{"push in order", 3, []op{{'p', 1, 1}, {'p', 2, 2}}, []byte{1, 2}},
		{"evicts oldest when full", 2, []op{{'p', 1, 1}, {'p', 2, 2}, {'p', 3, 3}}, []byte{2, 3}},
		{"remove middle", 3, []op{{'p', 1, 1}, {'p', 2, 2}, {'p', 3, 3}, {'r', 2, 0}}, []byte{1, 3}},
		{"remove head and tail", 3, []op{{'p', 1, 1}, {'p', 2, 2}, {'p', 3, 3}, {'r', 1, 0}, {'r', 3, 0}}, []byte{2}},
		{"remove absent", 3, []op{{'p', 1, 1}, {'r', 9, 0}}, []byte{1}},
		{"drop up to", 5, []op{{'p', 1, 1}, {'p', 2, 2}, {'p', 3, 3}, {'d', 0, 2}}, []byte{3}},
		{"reuse freed slots", 2, []op{{'p', 1, 1}, {'r', 1, 0}, {'p', 2, 2}, {'p', 3, 3}, {'p', 4, 4}}, []byte{3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newAddrList(tt.limit)
			for _, o := range tt.ops {
				applyOp(l, o)
			}
			if got := listAddrs(t, l); !slices.Equal(got, tt.want) {
				t.Errorf("list = %v, want %v", got, tt.want)
			}
			if len(l.slots) > tt.limit {
				t.Errorf("%d slots allocated, limit %d", len(l.slots), tt.limit)
			}
		})
	}
}

func applyOp(l *addrList, o op) {
	a := addrOf(o.addr)
	switch o.kind {
	case 'p':
		if _, ok := l.get(a); !ok {
			l.push(a, o.at)
		}
	case 'r':
		l.remove(a)
	case 'd':
		l.dropUpTo(o.at)
	}
}

// listAddrs walks the list front to back, checking links and index agree.
func listAddrs(t testing.TB, l *addrList) []byte {
	t.Helper()
	var out []byte
	prev := int32(noSlot)
	for i := l.head; i != noSlot; i = l.slots[i].next {
		s := l.slots[i]
		if s.prev != prev {
			t.Fatalf("slot %d prev = %d, want %d", i, s.prev, prev)
		}
		if l.index[s.addr] != i {
			t.Fatalf("index[%v] = %d, want %d", s.addr, l.index[s.addr], i)
		}
		out = append(out, s.addr.As4()[3])
		prev = i
		if len(out) > len(l.slots) {
			t.Fatal("cycle in list")
		}
	}
	if l.tail != prev {
		t.Fatalf("tail = %d, want %d", l.tail, prev)
	}
	if len(out) != l.len() {
		t.Fatalf("walked %d, index has %d", len(out), l.len())
	}
	return out
}

// FuzzAddrList checks the list against a plain slice model under any
// sequence of operations: order, bound and links must always agree.
func FuzzAddrList(f *testing.F) {
	f.Add(byte(3), []byte("p\x01\x01p\x02\x02p\x03\x03r\x02\x00"))
	f.Add(byte(2), []byte("p\x01\x01p\x02\x02p\x03\x03d\x00\x02"))
	f.Add(byte(1), []byte("p\x01\x01r\x01\x00p\x02\x02"))
	f.Fuzz(func(t *testing.T, limit byte, prog []byte) {
		lim := int(limit%16) + 1
		l := newAddrList(lim)
		var model []modelEntry
		for len(prog) >= 3 {
			o := op{kind: "prd"[prog[0]%3], addr: prog[1] % 32, at: int64(prog[2])}
			prog = prog[3:]
			applyOp(l, o)
			model = applyModel(model, o, lim)
		}
		got := listAddrs(t, l)
		if len(got) != len(model) || len(got) > lim {
			t.Fatalf("list %v, model %v, limit %d", got, model, lim)
		}
		for i, e := range model {
			if got[i] != e.addr {
				t.Fatalf("list %v, model %v", got, model)
			}
		}
	})
}

// modelEntry is one address in FuzzAddrList's slice model.
type modelEntry struct {
	addr byte
	at   int64
}

func applyModel(model []modelEntry, o op, limit int) []modelEntry {
	idx := slices.IndexFunc(model, func(e modelEntry) bool { return e.addr == o.addr })
	switch o.kind {
	case 'p':
		if idx < 0 {
			if len(model) >= limit {
				model = model[1:]
			}
			model = append(model, modelEntry{addr: o.addr, at: o.at})
		}
	case 'r':
		if idx >= 0 {
			model = slices.Delete(model, idx, idx+1)
		}
	case 'd':
		for len(model) > 0 && model[0].at <= o.at {
			model = model[1:]
		}
	}
	return model
}
