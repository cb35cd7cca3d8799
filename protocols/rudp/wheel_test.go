package rudp

import (
	"math/rand/v2"
	"testing"
)

// TestWheel checks the timing wheel against a plain list: random
// schedules, reschedules and removals over deltas from 1 tick to hours;
// advancing in random strides, every node fires exactly once, never
// before its tick, and at the first advance that passes it (the top
// level may fire a far timer early: its owner reschedules).
func TestWheel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var w wheel
	nodes := make([]timerNode, 500)
	want := make([]int64, len(nodes)) // 0: not scheduled
	index := map[*timerNode]int{}
	for i := range nodes {
		nodes[i].level = -1
		index[&nodes[i]] = i
	}
	const far = 1 << (wheelBits * wheelLevels)
	fired := 0
	for round := 0; round < 3000; round++ {
		for k := 0; k < 5; k++ {
			i := r.IntN(len(nodes))
			switch r.IntN(4) {
			case 0:
				w.remove(&nodes[i])
				want[i] = 0
			default:
				var d int64
				switch r.IntN(4) {
				case 0:
					d = 1 + r.Int64N(64)
				case 1:
					d = 1 + r.Int64N(5000)
				case 2:
					d = 1 + r.Int64N(400_000)
				default:
					d = 1 + r.Int64N(2*far)
				}
				w.schedule(&nodes[i], w.cur+d)
				want[i] = w.cur + d
			}
		}
		if w.count > 0 {
			if next := w.nextTick(); next <= w.cur {
				t.Fatalf("nextTick %d not after cur %d", next, w.cur)
			}
		}
		to := w.cur + 1 + r.Int64N(3000)
		if r.IntN(50) == 0 {
			to = w.cur + far + r.Int64N(far)
		}
		w.advance(to, func(n *timerNode) {
			i := index[n]
			switch {
			case want[i] == 0:
				t.Fatalf("node %d fired but was not scheduled", i)
			case want[i] > w.cur && want[i]-w.cur < far/64:
				t.Fatalf("node %d fired at %d, due %d", i, w.cur, want[i])
			}
			want[i] = 0
			fired++
		})
		for i, at := range want {
			if at != 0 && at <= to {
				t.Fatalf("node %d due %d not fired by %d", i, at, to)
			}
		}
	}
	n := 0
	for _, at := range want {
		if at != 0 {
			n++
		}
	}
	if n != w.count || fired < 1000 {
		t.Fatalf("%d scheduled, wheel counts %d; %d fired", n, w.count, fired)
	}
}
