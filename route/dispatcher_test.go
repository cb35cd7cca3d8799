package route

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

const (
	protoModbus uint8 = 1
	protoCoAP   uint8 = 3
)

// pool returns n workers that all take protocol proto.
func pool(n int, proto uint8) []WorkerSpec {
	ws := make([]WorkerSpec, n)
	for i := range ws {
		ws[i].Allowed = 1 << proto
	}
	return ws
}

func mustDispatcher(t testing.TB, p Policy, ws []WorkerSpec, window int) *Dispatcher {
	t.Helper()
	d, err := NewDispatcher(p, ws, window)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var parsePolicyTests = []struct {
	in   string
	want Policy
	err  error
}{
	{"", Entropy, nil},
	{"entropy", Entropy, nil},
	{"roundrobin", RoundRobin, nil},
	{" RoundRobin\t", RoundRobin, nil},
	{"inline", Inline, nil},
	{"LeastConns", LeastConns, nil},
	{"round-robin", Entropy, ErrPolicy},
	{"random", Entropy, ErrPolicy},
	{"inline2", Entropy, ErrPolicy},
}

func TestParsePolicy(t *testing.T) {
	for _, tt := range parsePolicyTests {
		got, err := ParsePolicy(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if s := Policy(7).String(); s != "Policy(7)" {
		t.Errorf("Policy(7).String() = %q", s)
	}
}

func FuzzParsePolicy(f *testing.F) {
	for _, tt := range parsePolicyTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePolicy(s)
		if err != nil {
			if !errors.Is(err, ErrPolicy) {
				t.Fatalf("ParsePolicy(%q) error %v is not ErrPolicy", s, err)
			}
			return
		}
		if back, err := ParsePolicy(p.String()); err != nil || back != p {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, p, p.String(), back, err)
		}
	})
}

func TestNewDispatcherErrors(t *testing.T) {
	tests := []struct {
		name    string
		policy  Policy
		workers []WorkerSpec
		window  int
		err     error
	}{
		{"ok", Entropy, pool(4, 1), 0, nil},
		{"no workers", Inline, nil, 0, nil},
		{"window 1", RoundRobin, pool(1, 1), 1, nil},
		{"max window", Entropy, pool(1, 1), MaxWindow, nil},
		{"bad policy", Policy(9), pool(1, 1), 0, ErrPolicy},
		{"negative window", Entropy, pool(1, 1), -1, ErrWindow},
		{"huge window", Entropy, pool(1, 1), MaxWindow + 1, ErrWindow},
		{"too many workers", Entropy, pool(MaxWorkers+1, 1), 0, ErrWorkers},
		{"mask past 16", Entropy, []WorkerSpec{{Allowed: 1 << 16}}, 0, ErrAllowed},
		{"all ones", Entropy, []WorkerSpec{{Allowed: ^uint64(0)}}, 0, ErrAllowed},
		{"all protocols", Entropy, []WorkerSpec{{Allowed: AllProtocols}}, 0, nil},
	}
	for _, tt := range tests {
		d, err := NewDispatcher(tt.policy, tt.workers, tt.window)
		if !errors.Is(err, tt.err) || (err == nil) != (d != nil) {
			t.Errorf("%s: NewDispatcher = %v, %v; want error %v", tt.name, d, err, tt.err)
		}
	}
}

func TestPickNoneEligible(t *testing.T) {
	ws := []WorkerSpec{{Allowed: 1 << protoModbus}, {Allowed: 1 << protoModbus}}
	for _, p := range []Policy{Entropy, RoundRobin, Inline} {
		d := mustDispatcher(t, p, ws, 0)
		for _, proto := range []uint8{0, protoCoAP, MaxProto, 255} {
			if got := d.Pick(proto, PatternSteady); got != -1 {
				t.Errorf("%v: Pick(%d) = %d, want -1", p, proto, got)
			}
		}
		if got := d.Pick(protoModbus, PatternSteady); p == Inline && got != -1 {
			t.Errorf("Inline: Pick = %d, want -1", got)
		}
	}
}

func TestPickRoundRobin(t *testing.T) {
	ws := pool(4, protoModbus)
	ws[2].Allowed = 1 << protoCoAP // not in the modbus rotation
	d := mustDispatcher(t, RoundRobin, ws, 0)
	counts := make([]int, len(ws))
	for range 30 {
		counts[d.Pick(protoModbus, PatternBursty)]++
	}
	if counts[0] != 10 || counts[1] != 10 || counts[2] != 0 || counts[3] != 10 {
		t.Fatalf("round robin counts %v, want 10/10/0/10", counts)
	}
	if d.Load(0) != 10 {
		t.Fatalf("Load(0) = %d, want 10", d.Load(0))
	}
}

func TestEntropyCost(t *testing.T) {
	const bit = 1 << 5
	tests := []struct {
		load   int64
		recent uint64
		want   uint64
	}{
		{0, 0, 0},
		{3, 0, 3 * LoadWeight},
		{0, 1 << 6, 0},            // another class only
		{0, bit, DupPenalty + 63}, // the class alone: narrowest mix
		{2, bit | 1<<6, 2*LoadWeight + DupPenalty + 62},
		{0, ^uint64(0), DupPenalty},            // broadest mix
		{-5, 0, 0},                             // a negative load counts as 0
		{1 << 62, 0, maxCostLoad * LoadWeight}, // clamped, no overflow
	}
	for _, tt := range tests {
		if got := entropyCost(tt.load, tt.recent, bit); got != tt.want {
			t.Errorf("entropyCost(%d, %#x) = %d, want %d", tt.load, tt.recent, got, tt.want)
		}
	}
}

func TestPickEntropyPrefersMissingClass(t *testing.T) {
	d := mustDispatcher(t, Entropy, pool(3, protoModbus), 0)
	d.Observe(0, protoModbus, PatternBursty)
	d.Observe(1, protoModbus, PatternBursty)
	// Equal loads: the one worker without bursty traffic gets the burst.
	for range 5 {
		if got := d.Pick(protoModbus, PatternBursty); got != 2 {
			t.Fatalf("Pick(bursty) = %d, want 2 (the only worker lacking the class)", got)
		}
		d.Release(2, protoModbus, PatternBursty)
	}
	// One extra unit of work (a connection of another class) is worth
	// less than a duplicate class in the recent mix...
	d.workers[2].work.Store(1)
	if got := d.Pick(protoModbus, PatternBursty); got != 2 {
		t.Fatalf("with worker 2 at work 1: Pick = %d, want 2", got)
	}
	d.Release(2, protoModbus, PatternBursty)
	// ...two are not.
	d.workers[2].work.Store(2)
	if got := d.Pick(protoModbus, PatternBursty); got == 2 {
		t.Fatalf("worker 2 at work 2 picked over idle workers")
	}
}

// Among workers of equal work a live connection of the same class
// decides; one more unit of work on the other side outweighs it.
func TestPickEntropySpreadsLiveClass(t *testing.T) {
	d := mustDispatcher(t, Entropy, pool(2, protoModbus), 0)
	w := d.PickWeighted(protoModbus, PatternBursty, 1)
	other := 1 - w
	d.workers[other].work.Store(1) // a connection of another class
	if got := d.PickWeighted(protoModbus, PatternBursty, 1); got != other {
		t.Fatalf("second bursty on worker %d with the first, want %d (equal work)", got, other)
	}
	d.ReleaseWeighted(other, protoModbus, PatternBursty, 1)
	d.workers[other].work.Store(3)
	if got := d.PickWeighted(protoModbus, PatternBursty, 1); got != w {
		t.Fatalf("second bursty on worker %d at 3 units of work, want %d at 1", got, w)
	}
}

// placeAll places conns (weight, pattern) in order on a fresh entropy
// dispatcher of n workers and returns where each went.
func placeAll(t *testing.T, n int, conns [][2]uint32) []int {
	t.Helper()
	d := mustDispatcher(t, Entropy, pool(n, protoModbus), 0)
	at := make([]int, len(conns))
	for i, c := range conns {
		at[i] = d.PickWeighted(protoModbus, Pattern(c[1]), c[0])
	}
	return at
}

// Crafted loads: the adversarial order of examples/bench/placement. Every
// 8th connection is a heavy device (weight 125: trains of messages that
// cost 2 ms each, weighed while eight of them shared a worker) among
// quiet ones (weight 3); a slow handler stretches the heavy devices'
// gaps, so all of them read as steady. Each worker must get two heavy
// devices. Fails before work came first: one live steady connection
// outweighed 64 units, so the heavy devices went where the steady count
// was low and landed 1/3/3/1.
func TestPickEntropyWeighsWorkOverClass(t *testing.T) {
	var conns [][2]uint32
	for i := range 64 {
		w := uint32(3)
		if i%8 == 7 {
			w = 125
		}
		conns = append(conns, [2]uint32{w, uint32(PatternSteady)})
	}
	at := placeAll(t, 4, conns)
	heavy := make([]int, 4)
	for i, w := range at {
		if conns[i][0] == 125 {
			heavy[w]++
		}
	}
	for w, n := range heavy {
		if n != 2 {
			t.Fatalf("heavy devices per worker %v, want 2 each (worker %d)", heavy, w)
		}
	}
	// The same with the heavy ones known as bursty: the class spreads
	// them too.
	for i := range conns {
		if conns[i][0] == 125 {
			conns[i][1] = uint32(PatternBursty)
		}
	}
	at = placeAll(t, 4, conns)
	clear(heavy)
	for i, w := range at {
		if conns[i][0] == 125 {
			heavy[w]++
		}
	}
	if heavy[0] != 2 || heavy[1] != 2 || heavy[2] != 2 || heavy[3] != 2 {
		t.Fatalf("bursty heavy devices per worker %v, want 2 each", heavy)
	}
}

// A heavy connection goes to the worker with less work even when that
// worker holds more connections of its class (the smallest case of the
// test above, by hand).
func TestPickEntropyHeavyAvoidsHeavy(t *testing.T) {
	d := mustDispatcher(t, Entropy, pool(2, protoModbus), 0)
	d.workers[0].classes[classIndex(protoModbus, PatternSteady)].Store(1)
	d.workers[0].work.Store(60) // one steady connection of 60 units
	d.workers[1].classes[classIndex(protoModbus, PatternSteady)].Store(2)
	d.workers[1].work.Store(2) // two of one unit
	if got := d.PickWeighted(protoModbus, PatternSteady, 60); got != 1 {
		t.Fatalf("a 60-unit connection went to worker %d (60 units), want 1 (2 units)", got)
	}
	allocs := testing.AllocsPerRun(100, func() {
		d.ReleaseWeighted(d.PickWeighted(protoModbus, PatternSteady, 60), protoModbus, PatternSteady, 60)
	})
	if allocs != 0 {
		t.Fatalf("Pick on crafted loads allocates %v", allocs)
	}
}

// A duplicate class is cheaper on a worker whose recent mix is broad.
func TestPickEntropyPrefersBroadMix(t *testing.T) {
	ws := []WorkerSpec{{Allowed: AllProtocols}, {Allowed: AllProtocols}}
	d := mustDispatcher(t, Entropy, ws, 0)
	d.Observe(0, protoModbus, PatternSteady)
	d.Observe(1, protoModbus, PatternSteady)
	d.Observe(1, protoCoAP, PatternSteady)
	d.Observe(1, protoCoAP, PatternBursty)
	for range 4 {
		if got := d.Pick(protoModbus, PatternSteady); got != 1 {
			t.Fatalf("Pick = %d, want 1 (broader mix)", got)
		}
		d.Release(1, protoModbus, PatternSteady)
	}
}

// Equal workers alternate rather than one taking every tie.
func TestPickEntropyTiesRotate(t *testing.T) {
	d := mustDispatcher(t, Entropy, pool(4, protoModbus), 0)
	seen := map[int]bool{}
	for range 8 {
		w := d.Pick(protoModbus, PatternSteady)
		seen[w] = true
		d.Release(w, protoModbus, PatternSteady)
	}
	if len(seen) != 4 {
		t.Fatalf("ties went to workers %v, want all 4", seen)
	}
}

// Whatever the mix, Entropy's choice is within the slack of its cost: no
// other eligible worker had a smaller same + load by more than one
// (same: its live connections of the class placed; every weight is 1, so
// work is load, and dup is under two units).
func TestPickEntropyLoadBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ws := pool(5, protoModbus)
	ws[4].Allowed = AllProtocols
	d := mustDispatcher(t, Entropy, ws, 16)
	live := make([][]Pattern, len(ws)) // each worker's live connections, by pattern
	same := func(w int, p Pattern) int {
		n := 0
		for _, q := range live[w] {
			if q == p {
				n++
			}
		}
		return n
	}
	for i := range 20_000 {
		switch op := rng.IntN(10); {
		case op < 4:
			pattern := Pattern(rng.IntN(int(numPatterns)))
			score := make([]int, len(ws))
			for w := range ws {
				score[w] = same(w, pattern) + len(live[w])
			}
			w := d.Pick(protoModbus, pattern)
			for o := range ws {
				if score[w] > score[o]+1 {
					t.Fatalf("op %d: picked worker %d at same+load %d, worker %d had %d", i, w, score[w], o, score[o])
				}
			}
			live[w] = append(live[w], pattern)
		case op < 7:
			w := rng.IntN(len(ws))
			if n := len(live[w]); n > 0 {
				k := rng.IntN(n)
				d.Release(w, protoModbus, live[w][k])
				live[w] = append(live[w][:k], live[w][k+1:]...)
			}
		default:
			d.Observe(rng.IntN(len(ws)), uint8(rng.IntN(MaxProto)), Pattern(rng.IntN(int(numPatterns))))
		}
	}
}

func TestObserveWindow(t *testing.T) {
	d := mustDispatcher(t, Entropy, pool(1, protoModbus), 4)
	a, b := classBit(protoModbus, PatternBursty), classBit(protoModbus, PatternSteady)
	for range 3 {
		d.Observe(0, protoModbus, PatternBursty)
	}
	if got := d.Bitmap(0); got != a {
		t.Fatalf("mid-window bitmap %#x, want %#x", got, a)
	}
	d.Observe(0, protoModbus, PatternBursty) // 4th event closes the window
	if got := d.Bitmap(0); got != a {
		t.Fatalf("after one window bitmap %#x, want %#x (in previous)", got, a)
	}
	for range 3 {
		d.Observe(0, protoModbus, PatternSteady)
	}
	if got := d.Bitmap(0); got != a|b {
		t.Fatalf("previous+current bitmap %#x, want %#x", got, a|b)
	}
	d.Observe(0, protoModbus, PatternSteady)
	if got := d.Bitmap(0); got != b {
		t.Fatalf("two windows on, bitmap %#x, want only %#x", got, b)
	}
}

func TestOutOfRangeArgumentsIgnored(t *testing.T) {
	d := mustDispatcher(t, Entropy, pool(2, protoModbus), 0)
	for _, w := range []int{-1, 2, 1 << 30} {
		d.Observe(w, protoModbus, PatternSteady)
		d.Release(w, protoModbus, PatternSteady)
		if d.Load(w) != 0 || d.Bitmap(w) != 0 {
			t.Errorf("worker %d: Load/Bitmap not 0", w)
		}
	}
	d.Observe(0, MaxProto, PatternSteady)
	if d.Bitmap(0) != 0 {
		t.Error("Observe with proto >= 16 changed the bitmap")
	}
	d.Release(0, protoModbus, PatternSteady)
	if d.Load(0) != 0 {
		t.Errorf("Release below zero: Load = %d", d.Load(0))
	}
}

// Several loops Pick and Release while each worker Observes its own
// index; run under -race. Loads must balance out to zero.
func TestDispatcherConcurrent(t *testing.T) {
	const loops, workers, perLoop = 4, 4, 5000
	d := mustDispatcher(t, Entropy, pool(workers, protoModbus), 64)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d.Observe(w, protoModbus, Pattern(i%int(numPatterns)))
			}
		}()
	}
	var picks sync.WaitGroup
	for l := range loops {
		picks.Add(1)
		go func() {
			defer picks.Done()
			for i := range perLoop {
				pattern := Pattern((i + l) % int(numPatterns))
				w := d.Pick(protoModbus, pattern)
				if w < 0 || w >= workers {
					t.Errorf("Pick = %d", w)
					return
				}
				d.Release(w, protoModbus, pattern)
			}
		}()
	}
	picks.Wait()
	close(stop)
	wg.Wait()
	for w := range workers {
		if d.Load(w) != 0 {
			t.Errorf("worker %d load %d after all releases", w, d.Load(w))
		}
	}
}

func TestDispatcherAllocs(t *testing.T) {
	for _, p := range []Policy{Entropy, RoundRobin, Inline, LeastConns} {
		d := mustDispatcher(t, p, pool(8, protoModbus), 0)
		allocs := testing.AllocsPerRun(1000, func() {
			w := d.PickWeighted(protoModbus, PatternBursty, 7)
			d.Observe(max(w, 0), protoModbus, PatternBursty)
			d.Reweigh(w, 7, 9)
			d.ReleaseWeighted(w, protoModbus, PatternBursty, 9)
			_ = d.Bitmap(0)
		})
		if allocs != 0 {
			t.Errorf("%v: Pick/Observe/Release allocate %v per run, want 0", p, allocs)
		}
	}
}

// FuzzDispatcher drives a small dispatcher with an arbitrary op sequence
// and checks Pick's contract: an eligible worker (or -1), and load never
// negative.
func FuzzDispatcher(f *testing.F) {
	f.Add(uint8(0), uint16(0x0002), uint16(0xffff), []byte{0, 1, 2, 3, 4, 5})
	f.Add(uint8(1), uint16(0x000a), uint16(0x0008), []byte{0x10, 0x21, 0x32, 0x43})
	f.Add(uint8(2), uint16(0), uint16(1), []byte{0xff, 0x80, 0x7f})
	f.Fuzz(func(t *testing.T, policy uint8, mask0, mask1 uint16, ops []byte) {
		ws := []WorkerSpec{{Allowed: uint64(mask0)}, {Allowed: uint64(mask1)}, {Allowed: uint64(mask0 | mask1)}}
		d, err := NewDispatcher(Policy(policy%uint8(numPolicies)), ws, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			proto, pattern, worker := op&0x1f, Pattern(op>>5), int(op>>6)-1
			switch op % 3 {
			case 0:
				w := d.Pick(proto, pattern)
				if w >= 0 && (proto >= MaxProto || ws[w].Allowed&(1<<proto) == 0) {
					t.Fatalf("Pick(%d) = worker %d, mask %#x", proto, w, ws[w].Allowed)
				}
			case 1:
				d.Observe(worker, proto, pattern)
			case 2:
				d.ReleaseWeighted(worker, proto, pattern, uint32(op))
				d.Reweigh(worker, uint32(op>>4), uint32(op&0xf))
			}
			for w := range ws {
				if d.Load(w) < 0 || d.Work(w) < 0 {
					t.Fatalf("worker %d load %d", w, d.Load(w))
				}
			}
		}
	})
}

// BenchmarkPick measures Pick (plus the Release that keeps loads steady)
// per policy and pool size, with workers whose mixes differ.
func BenchmarkPick(b *testing.B) {
	for _, p := range []Policy{Inline, RoundRobin, LeastConns, Entropy} {
		for _, n := range []int{2, 8, 32} {
			b.Run(fmt.Sprintf("%v/workers=%d", p, n), func(b *testing.B) {
				d := mustDispatcher(b, p, pool(n, protoModbus), 0)
				for w := range n {
					d.Observe(w, protoModbus, Pattern(w%int(numPatterns)))
					for range w % 3 {
						d.Pick(protoModbus, PatternSteady)
					}
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					w := d.PickWeighted(protoModbus, Pattern(i&3), uint32(i&15))
					d.ReleaseWeighted(w, protoModbus, Pattern(i&3), uint32(i&15))
				}
			})
		}
	}
}

// BenchmarkObserve is the per-event cost a worker pays.
func BenchmarkObserve(b *testing.B) {
	d := mustDispatcher(b, Entropy, pool(1, protoModbus), 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d.Observe(0, protoModbus, Pattern(i&3))
	}
}
