package route

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync/atomic"
)

// Policy is how a Dispatcher chooses a worker.
type Policy uint8

// The dispatch policies.
const (
	// Entropy (the default) picks the least loaded eligible worker,
	// preferring one whose recent traffic mix lacks the new connection's
	// class. See Dispatcher.Pick.
	Entropy Policy = iota
	// RoundRobin rotates among eligible workers, ignoring load and mix.
	RoundRobin
	// Inline makes Pick return -1: the epoll loop handles the connection
	// itself (seed 002's baseline, kept for benchmarks).
	Inline
	// LeastConns picks the eligible worker with the fewest live
	// connections, ignoring their work and mix (the usual
	// least-connections balancer, kept as a baseline for benchmarks).
	LeastConns
	numPolicies
)

// Dispatcher limits.
const (
	// DefaultWindow is the events per entropy window when 0 is given.
	DefaultWindow = 1024
	// MaxWindow bounds the window: past it the "recent" mix would remember
	// minutes of traffic on a busy worker and adapt too slowly.
	MaxWindow = 1 << 24
	// MaxWorkers bounds the workers one Dispatcher spreads over; Pick
	// scans the eligible ones, so this also bounds Pick's cost.
	MaxWorkers = 1024
)

// Entropy cost weights; see Dispatcher.Pick for the formula.
const (
	// LoadWeight is the cost of one unit of work (Profile.Weight): one
	// connection that does little.
	LoadWeight = 64
	// DupPenalty is the base cost of a worker that recently served the
	// class being placed; the popcount term adds 0..63 to it.
	DupPenalty = 64
	// ClassWeight is the cost of one live connection placed as the same
	// class: one unit of work. Among workers of equal work the class
	// spreads; a worker with less work wins over one with fewer
	// connections of the class (see PickWeighted for why).
	ClassWeight = LoadWeight
	// maxCostLoad keeps load*LoadWeight far from overflow.
	maxCostLoad = 1 << 40
)

// Dispatcher errors.
var (
	ErrPolicy  = errors.New("route: unknown dispatch policy")
	ErrWindow  = errors.New("route: dispatch window out of range")
	ErrWorkers = errors.New("route: too many workers")
	ErrAllowed = errors.New("route: allowed mask names a protocol >= 16")
)

var policyNames = [numPolicies]string{"entropy", "roundrobin", "inline", "leastconns"}

// String returns the name config files use for p.
func (p Policy) String() string {
	if p < numPolicies {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy parses "inline", "roundrobin", "leastconns" or "entropy"; "" is Entropy,
// the default. Case is ignored.
func ParsePolicy(s string) (Policy, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Entropy, nil
	}
	for i, name := range policyNames {
		if s == name {
			return Policy(i), nil
		}
	}
	return Entropy, fmt.Errorf("%w: %q", ErrPolicy, s)
}

// WorkerSpec describes one worker to the Dispatcher.
type WorkerSpec struct {
	// Allowed has bit i set when the worker takes protocol number i
	// (i < MaxProto).
	Allowed uint64
}

// workerState is one worker's dispatch state, three cache lines so that
// the fields each party writes do not invalidate what the others read:
// Pick reads line 0 from every loop, Pick and Release write line 1, and
// only the worker itself writes line 2 (on every event).
type workerState struct {
	allowed  uint64
	current  atomic.Uint64 // classes seen in this window; written by the worker
	previous atomic.Uint64 // classes seen in the last full window
	_        [cacheLine - 24]byte

	load atomic.Int64 // live connections
	work atomic.Int64 // the sum of their weights (Profile.Weight)
	_    [cacheLine - 16]byte

	// live connections by the class they were placed as (written by Pick
	// and Release only, like load)
	classes [MaxProto * numPatterns]atomic.Int32

	events atomic.Uint64 // events in this window; written by the worker
	_      [cacheLine - 8]byte
}

// rotor is a per-protocol rotating start, alone on its cache line.
type rotor struct {
	n atomic.Uint64
	_ [cacheLine - 8]byte
}

// Dispatcher chooses which worker owns a newly classified connection.
//
// Pick and Release may be called from any goroutine. Observe for worker i
// must be called only by worker i (it is single-writer for that worker's
// mix); Pick reads every worker's mix concurrently through atomics.
type Dispatcher struct {
	policy   Policy
	window   uint64
	workers  []workerState
	eligible [MaxProto][]int32 // per protocol: the workers allowed it, read-only
	rotors   [MaxProto]rotor
}

// NewDispatcher returns a Dispatcher over workers (indexes into the slice
// are the worker numbers Pick returns). window is the events per entropy
// window: 0 means DefaultWindow, otherwise 1..MaxWindow.
func NewDispatcher(p Policy, workers []WorkerSpec, window int) (*Dispatcher, error) {
	if p >= numPolicies {
		return nil, fmt.Errorf("%w: %d", ErrPolicy, uint8(p))
	}
	if window == 0 {
		window = DefaultWindow
	}
	if window < 1 || window > MaxWindow {
		return nil, fmt.Errorf("%w: %d not in 1..%d", ErrWindow, window, MaxWindow)
	}
	if len(workers) > MaxWorkers {
		return nil, fmt.Errorf("%w: %d > %d", ErrWorkers, len(workers), MaxWorkers)
	}
	d := &Dispatcher{policy: p, window: uint64(window), workers: make([]workerState, len(workers))}
	for i, w := range workers {
		if w.Allowed&^AllProtocols != 0 {
			return nil, fmt.Errorf("%w: worker %d mask %#x", ErrAllowed, i, w.Allowed)
		}
		d.workers[i].allowed = w.Allowed
		for proto := range MaxProto {
			if w.Allowed&(1<<proto) != 0 {
				d.eligible[proto] = append(d.eligible[proto], int32(i))
			}
		}
	}
	return d, nil
}

// Policy returns the dispatcher's policy.
func (d *Dispatcher) Policy() Policy { return d.policy }

// Workers returns the number of workers.
func (d *Dispatcher) Workers() int { return len(d.workers) }

// Pick is PickWeighted with weight 1: a connection nothing is known of.
func (d *Dispatcher) Pick(proto uint8, pattern Pattern) int {
	return d.PickWeighted(proto, pattern, 1)
}

// PickWeighted returns the worker for a new connection of protocol proto
// expected to behave like pattern and to weigh weight units of work
// (Profile.Weight; what its source's history says, or 1), and counts the
// connection and its weight on that worker; it returns -1 under Inline or
// when no worker takes proto.
//
// Under Entropy it returns the eligible worker with the lowest
//
//	cost = work*LoadWeight + same*ClassWeight + dup
//	dup  = 0                                        if class ∉ recent
//	     = DupPenalty + (64 - popcount(recent))     if class ∈ recent
//
// where class = proto*4 + pattern, same is the worker's live connections
// placed as that class, work is the sum of the weights of all its live
// connections, and recent = the worker's classes in its current and
// previous window. Ties go to the first worker scanned from a
// start that rotates on every Pick, so equal workers alternate. Under
// LeastConns it returns the one with the fewest live connections, from
// the same rotating start.
//
// Why work comes first: work is what a worker's other connections wait
// behind, and a connection's weight measures it (events a second times
// the handler time sampled on that very connection). The class is a
// weaker signal: it is decided from the gaps between a connection's
// events, and a handler that takes milliseconds stretches those gaps, so
// a device that sends trains of messages costing 2 ms each, sharing its
// worker with another like it, arrives every 4 ms or more and reads as
// steady, like the quiet devices around it. When the class came first
// (one live connection of the class outweighed 64 units of work), such
// devices, counted as one class with the quiet ones, landed 1/3/3/1 on
// four workers and the bystanders beside three of them fell hundreds of
// milliseconds behind (examples/bench/placement); work first puts them
// 2/2/2/2. same is a tie-break worth one unit: connections of one class
// spread over workers of equal work, as unknown connections (weight 1)
// do. dup is 64..127, between one and two units' worth, so a worker
// already serving this class loses to one that lacks it and has one more
// unit of work. Within that slack the
// class spreads: connections of one protocol and pattern land on
// different workers instead of piling their bursts (or their
// simultaneous timeouts) onto one goroutine, and in a mixed pool the
// protocols spread the same way, since the class includes the protocol.
// The popcount term makes a duplicate cheaper on a worker with a broad
// recent mix than on one that serves little else: adding a class to a
// narrow mix concentrates it further (lowers its entropy), adding it to a
// broad one changes it little. Integer only, no allocation.
//
// Concurrent Picks from several loops may see the same loads and choose
// the same worker; the error is one connection and corrects itself.
func (d *Dispatcher) PickWeighted(proto uint8, pattern Pattern, weight uint32) int {
	if d.policy == Inline || proto >= MaxProto {
		return -1
	}
	elig := d.eligible[proto]
	if len(elig) == 0 {
		return -1
	}
	start := int(d.rotors[proto].n.Add(1) % uint64(len(elig)))
	var best int32
	switch d.policy {
	case RoundRobin:
		best = elig[start]
	case LeastConns:
		best = d.fewestConns(elig, start)
	default:
		best = d.leastCost(elig, start, proto, pattern)
	}
	w := &d.workers[best]
	w.load.Add(1)
	w.work.Add(int64(clampWeight(weight)))
	w.classes[classIndex(proto, pattern)].Add(1)
	return int(best)
}

func clampWeight(w uint32) uint32 { return min(max(w, 1), MaxWeight) }

// leastCost scans elig from start, wrapping, and returns the worker with
// the lowest entropy cost; the first one scanned wins ties.
func (d *Dispatcher) leastCost(elig []int32, start int, proto uint8, pattern Pattern) int32 {
	bit, class := classBit(proto, pattern), classIndex(proto, pattern)
	best, bestCost := elig[start], ^uint64(0)
	for i := range elig {
		j := start + i
		if j >= len(elig) {
			j -= len(elig)
		}
		w := &d.workers[elig[j]]
		c := entropyCost(w.work.Load(), w.current.Load()|w.previous.Load(), bit)
		c += uint64(min(max(w.classes[class].Load(), 0), 1<<24)) * ClassWeight
		if c < bestCost {
			best, bestCost = elig[j], c
		}
	}
	return best
}

// fewestConns scans elig from start, wrapping, and returns the worker with
// the fewest live connections; the first one scanned wins ties.
func (d *Dispatcher) fewestConns(elig []int32, start int) int32 {
	best, bestLoad := elig[start], int64(-1)
	for i := range elig {
		j := start + i
		if j >= len(elig) {
			j -= len(elig)
		}
		if n := d.workers[elig[j]].load.Load(); bestLoad < 0 || n < bestLoad {
			best, bestLoad = elig[j], n
		}
	}
	return best
}

// entropyCost is the formula documented on PickWeighted.
func entropyCost(work int64, recent, bit uint64) uint64 {
	work = min(max(work, 0), maxCostLoad)
	cost := uint64(work) * LoadWeight
	if recent&bit != 0 {
		cost += DupPenalty + uint64(64-bits.OnesCount64(recent))
	}
	return cost
}

// Observe records that worker handled one event of a connection of class
// (proto, pattern). Only worker itself may call it. Every window events
// the worker's current bitmap becomes its previous one and a new window
// starts, so the mix follows event counts, not wall time: an idle worker's
// mix does not age, a busy one's adapts quickly. Out-of-range arguments
// are ignored.
func (d *Dispatcher) Observe(worker int, proto uint8, pattern Pattern) {
	if uint(worker) >= uint(len(d.workers)) || proto >= MaxProto {
		return
	}
	w := &d.workers[worker]
	bit := classBit(proto, pattern)
	// Single writer: plain load+store, and no store at all when the bit is
	// already set, so Pick's readers keep their cached copy of this line.
	if cur := w.current.Load(); cur&bit == 0 {
		w.current.Store(cur | bit)
	}
	n := w.events.Load() + 1
	if n < d.window {
		w.events.Store(n)
		return
	}
	// previous first: a Pick in between sees current twice, never neither.
	w.previous.Store(w.current.Load())
	w.current.Store(0)
	w.events.Store(0)
}

// Release is ReleaseWeighted of a connection placed as (proto, pattern)
// with weight 1.
func (d *Dispatcher) Release(worker int, proto uint8, pattern Pattern) {
	d.ReleaseWeighted(worker, proto, pattern, 1)
}

// ReleaseWeighted records that a connection picked for worker as (proto,
// pattern) is gone, with the weight it was last counted at (picked with,
// or moved to by Reweigh). No count goes below zero, so a stray release is
// harmless.
func (d *Dispatcher) ReleaseWeighted(worker int, proto uint8, pattern Pattern, weight uint32) {
	if uint(worker) >= uint(len(d.workers)) {
		return
	}
	w := &d.workers[worker]
	decrementTo0(&w.load, 1)
	decrementTo0(&w.work, int64(clampWeight(weight)))
	if proto < MaxProto {
		c := &w.classes[classIndex(proto, pattern)]
		for {
			n := c.Load()
			if n <= 0 || c.CompareAndSwap(n, n-1) {
				break
			}
		}
	}
}

func decrementTo0(v *atomic.Int64, by int64) {
	for {
		n := v.Load()
		if n <= 0 || v.CompareAndSwap(n, max(n-by, 0)) {
			return
		}
	}
}

// Reweigh moves one of worker's connections from weight from to weight
// to: its owner learned more about it (Profile.Event reported a change).
func (d *Dispatcher) Reweigh(worker int, from, to uint32) {
	if uint(worker) >= uint(len(d.workers)) {
		return
	}
	from, to = clampWeight(from), clampWeight(to)
	if from == to {
		return
	}
	w := &d.workers[worker]
	if to > from {
		w.work.Add(int64(to - from))
		return
	}
	decrementTo0(&w.work, int64(from-to))
}

// Work returns the sum of the weights of worker's live connections, or 0
// for an unknown worker.
func (d *Dispatcher) Work(worker int) int {
	if uint(worker) >= uint(len(d.workers)) {
		return 0
	}
	return int(max(d.workers[worker].work.Load(), 0))
}

// Load returns worker's live connections as counted by Pick and Release,
// or 0 for an unknown worker.
func (d *Dispatcher) Load(worker int) int {
	if uint(worker) >= uint(len(d.workers)) {
		return 0
	}
	return int(max(d.workers[worker].load.Load(), 0))
}

// Bitmap returns worker's recent traffic classes (the OR of its current
// and previous windows, what Pick looks at): bit proto*4+pattern. 0 for an
// unknown worker.
func (d *Dispatcher) Bitmap(worker int) uint64 {
	if uint(worker) >= uint(len(d.workers)) {
		return 0
	}
	w := &d.workers[worker]
	return w.current.Load() | w.previous.Load()
}
