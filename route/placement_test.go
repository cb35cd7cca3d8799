package route

import "testing"

// Entropy weighs work, LeastConns counts connections: one worker holds a
// single heavy connection, the other three light ones.
func TestPickWeighsWorkNotConnections(t *testing.T) {
	for _, tt := range []struct {
		p    Policy
		want int
	}{{Entropy, 1}, {LeastConns, 0}} {
		d := mustDispatcher(t, tt.p, pool(2, protoModbus), 0)
		d.workers[0].load.Store(1)
		d.workers[0].work.Store(30)
		d.workers[1].load.Store(3)
		d.workers[1].work.Store(3)
		for range 4 { // whatever the rotating start
			w := d.PickWeighted(protoModbus, PatternSteady, 1)
			if w != tt.want {
				t.Fatalf("%v picked worker %d, want %d", tt.p, w, tt.want)
			}
			d.ReleaseWeighted(w, protoModbus, PatternSteady, 1)
		}
	}
}

func TestReweighAndRelease(t *testing.T) {
	d := mustDispatcher(t, Entropy, pool(1, protoModbus), 0)
	w := d.PickWeighted(protoModbus, PatternUnknown, 1)
	d.Reweigh(w, 1, 25)
	if d.Work(w) != 25 || d.Load(w) != 1 {
		t.Fatalf("after Reweigh: work %d load %d, want 25 1", d.Work(w), d.Load(w))
	}
	d.Reweigh(w, 25, 4)
	if d.Work(w) != 4 {
		t.Fatalf("after Reweigh down: work %d, want 4", d.Work(w))
	}
	d.ReleaseWeighted(w, protoModbus, PatternUnknown, 4)
	d.ReleaseWeighted(w, protoModbus, PatternUnknown, 4) // stray
	if d.Work(w) != 0 || d.Load(w) != 0 {
		t.Fatalf("after release: work %d load %d, want 0 0", d.Work(w), d.Load(w))
	}
	// Weights outside 1..MaxWeight are clamped both ways.
	d.PickWeighted(protoModbus, PatternUnknown, 0)
	d.Reweigh(0, 0, 1<<31)
	if d.Work(0) != MaxWeight {
		t.Fatalf("work %d, want MaxWeight", d.Work(0))
	}
}

// adversarial places connections in the order that stacks heavy ones
// under round-robin: every workers-th connection is bursty (weight
// heavy), the rest steady bystanders (weight 1). It returns each
// worker's work and its bursty count.
func adversarial(t *testing.T, p Policy, workers, rounds int, heavy uint32) (work []int, bursty []int) {
	d := mustDispatcher(t, p, pool(workers, protoModbus), 0)
	bursty = make([]int, workers)
	for i := range workers * rounds {
		pat, weight := PatternSteady, uint32(1)
		if i%workers == workers-1 {
			pat, weight = PatternBursty, heavy
		}
		w := d.PickWeighted(protoModbus, pat, weight)
		d.Observe(w, protoModbus, pat)
		if pat == PatternBursty {
			bursty[w]++
		}
	}
	for w := range workers {
		work = append(work, d.Work(w))
	}
	return work, bursty
}

func TestPickAdversarialOrder(t *testing.T) {
	const workers, rounds, heavy = 4, 25, 20
	_, rr := adversarial(t, RoundRobin, workers, rounds, heavy)
	if stacked(rr) != rounds {
		t.Fatalf("round-robin bursty per worker %v: the order no longer stacks, the test is moot", rr)
	}
	_, lc := adversarial(t, LeastConns, workers, rounds, heavy)
	if stacked(lc) != rounds {
		t.Fatalf("least-conns bursty per worker %v: expected it to stack like round-robin", lc)
	}
	work, en := adversarial(t, Entropy, workers, rounds, heavy)
	lo, hi := work[0], work[0]
	for _, v := range work {
		lo, hi = min(lo, v), max(hi, v)
	}
	// Work per worker within 1.2x; bursty ones spread within one.
	if hi*10 > lo*12 {
		t.Errorf("entropy work per worker %v: max/min > 1.2", work)
	}
	blo, bhi := en[0], en[0]
	for _, v := range en {
		blo, bhi = min(blo, v), max(bhi, v)
	}
	if bhi-blo > 1 {
		t.Errorf("entropy bursty per worker %v, want spread within one", en)
	}
}

func stacked(perWorker []int) int {
	m := 0
	for _, v := range perWorker {
		m = max(m, v)
	}
	return m
}

// In a mixed pool the class includes the protocol, so at equal work each
// protocol goes to the worker that is not serving it already: the mix per
// worker balances whatever the rotating start.
func TestPickMixedPoolBalancesProtocols(t *testing.T) {
	ws := []WorkerSpec{{Allowed: 1<<protoModbus | 1<<protoCoAP}, {Allowed: 1<<protoModbus | 1<<protoCoAP}}
	for round := range 4 {
		d := mustDispatcher(t, Entropy, ws, 0)
		for range round { // move the rotating start
			d.ReleaseWeighted(d.PickWeighted(protoModbus, PatternSteady, 1), protoModbus, PatternSteady, 1)
		}
		d.workers[0].work.Store(5)
		d.workers[1].work.Store(5)
		d.workers[0].current.Store(classBit(protoModbus, PatternSteady))
		d.workers[1].current.Store(classBit(protoCoAP, PatternSteady))
		if w := d.PickWeighted(protoModbus, PatternSteady, 1); w != 1 {
			t.Errorf("start %d: Modbus placed on worker %d, which serves Modbus already", round, w)
		}
		d.workers[1].work.Store(5)
		if w := d.PickWeighted(protoCoAP, PatternSteady, 1); w != 0 {
			t.Errorf("start %d: CoAP placed on worker %d, which serves CoAP already", round, w)
		}
	}
}
