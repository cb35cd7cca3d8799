// Package lossy is an in-memory network with impairments for tests and
// benchmarks of datagram protocols: seeded Bernoulli or bursty
// (Gilbert-Elliott) loss, delay and jitter, reordering, duplication,
// corruption, blackouts and NAT port rebinding, on a virtual clock. It
// reads no clock and opens no socket: the caller passes the time to every
// call, so a run is deterministic for a seed and as fast as the CPU. It
// counts datagrams and bytes each way.
//
// Datagrams toward the server address go "up"; everything else "down".
// Clients send from their inside address; the network's NAT maps it to an
// outside address (the same one until Rebind), which is what the server
// sees, and maps replies back. After a rebinding, replies to the old
// outside address are dropped, as a real NAT drops them.
package lossy

import (
	"container/heap"
	"math/rand/v2"
	"net/netip"
	"time"
)

// GilbertElliott is a two-state loss model: in the good state datagrams
// are lost with probability LossGood, in the bad one with LossBad; before
// each datagram the state flips with probability GoodToBad or BadToGood.
// The mean loss is LossGood*(1-pi) + LossBad*pi, pi = GoodToBad /
// (GoodToBad + BadToGood).
type GilbertElliott struct {
	GoodToBad, BadToGood float64
	LossGood, LossBad    float64
}

// Impairment is what one direction does to datagrams.
type Impairment struct {
	Loss         float64         // Bernoulli loss probability (ignored when Burst is set)
	Burst        *GilbertElliott // bursty loss
	Delay        time.Duration   // one-way base delay
	Jitter       time.Duration   // uniform extra delay in [0, Jitter)
	Reorder      float64         // probability that a datagram is held back ReorderDelay more
	ReorderDelay time.Duration
	Duplicate    float64 // probability that a datagram is delivered twice
	Corrupt      float64 // probability that one bit of a datagram is flipped
	// Rate, when set, is the link's bandwidth in bytes per second: a
	// datagram waits for the ones before it to be serialized (a queue
	// that grows when the sender sends faster than the link).
	Rate int
}

// Config is a network: the server's address and each direction.
type Config struct {
	Seed     uint64
	Server   netip.AddrPort
	Up, Down Impairment
}

// Counters of one direction.
type Counters struct {
	Sent, Delivered, Lost, Duplicated, Corrupted, Reordered, Blackholed uint64
	BytesSent, BytesDelivered                                           uint64
}

// Stats is both directions.
type Stats struct {
	Up, Down Counters
	NATDrops uint64 // replies to an outside address no longer mapped
}

// Network is the in-memory network. One goroutine uses it.
type Network struct {
	cfg       Config
	rng       *rand.Rand
	queue     eventQueue
	seq       uint64
	bad       [2]bool      // Gilbert-Elliott state per direction
	linkFree  [2]time.Time // when each direction's link has serialized its queue
	blackouts [][2]time.Time
	outside   map[netip.AddrPort]netip.AddrPort // inside -> current outside
	inside    map[netip.AddrPort]netip.AddrPort // current outside -> inside
	retired   map[netip.AddrPort]bool           // outside addresses a rebinding dropped
	nextPort  uint16
	stats     Stats
	free      [][]byte
}

// New makes a network.
func New(cfg Config) *Network {
	return &Network{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9E3779B97F4A7C15)),
		outside:  make(map[netip.AddrPort]netip.AddrPort),
		inside:   make(map[netip.AddrPort]netip.AddrPort),
		retired:  make(map[netip.AddrPort]bool),
		nextPort: 20000,
	}
}

// Stats returns the counters.
func (n *Network) Stats() Stats { return n.stats }

// SetImpairment changes one direction's impairment from now on.
func (n *Network) SetImpairment(up bool, imp Impairment) {
	if up {
		n.cfg.Up = imp
	} else {
		n.cfg.Down = imp
	}
}

// Blackout drops everything sent in [from, to), both ways.
func (n *Network) Blackout(from, to time.Time) {
	n.blackouts = append(n.blackouts, [2]time.Time{from, to})
}

// Rebind gives a client a new outside port, as a NAT does when its
// mapping expires; it returns the new outside address.
func (n *Network) Rebind(inside netip.AddrPort) netip.AddrPort {
	old := n.Outside(inside)
	delete(n.inside, old)
	n.retired[old] = true
	n.nextPort++
	out := netip.AddrPortFrom(inside.Addr(), n.nextPort)
	n.outside[inside], n.inside[out] = out, inside
	return out
}

// Outside is where the server sees inside come from.
func (n *Network) Outside(inside netip.AddrPort) netip.AddrPort {
	if out, ok := n.outside[inside]; ok {
		return out
	}
	return inside
}

// Send puts a datagram on the wire at now; the network copies b.
func (n *Network) Send(from, to netip.AddrPort, b []byte, now time.Time) {
	up := to == n.cfg.Server
	dir, c, imp := 1, &n.stats.Down, &n.cfg.Down
	if up {
		dir, c, imp = 0, &n.stats.Up, &n.cfg.Up
		from = n.Outside(from)
	}
	c.Sent++
	c.BytesSent += uint64(len(b))
	if n.blackedOut(now) {
		c.Blackholed++
		return
	}
	if n.lost(dir, imp) {
		c.Lost++
		return
	}
	var queued time.Duration
	if imp.Rate > 0 {
		start := n.linkFree[dir]
		if start.Before(now) {
			start = now
		}
		n.linkFree[dir] = start.Add(time.Duration(int64(len(b)) * int64(time.Second) / int64(imp.Rate)))
		queued = n.linkFree[dir].Sub(now)
	}
	copies := 1
	if imp.Duplicate > 0 && n.rng.Float64() < imp.Duplicate {
		copies = 2
		c.Duplicated++
	}
	for i := 0; i < copies; i++ {
		delay := imp.Delay + queued
		if imp.Jitter > 0 {
			delay += time.Duration(n.rng.Int64N(int64(imp.Jitter)))
		}
		if imp.Reorder > 0 && n.rng.Float64() < imp.Reorder {
			delay += imp.ReorderDelay
			c.Reordered++
		}
		data := append(n.buffer(), b...)
		if imp.Corrupt > 0 && n.rng.Float64() < imp.Corrupt && len(data) > 0 {
			data[n.rng.IntN(len(data))] ^= 1 << n.rng.IntN(8)
			c.Corrupted++
		}
		n.seq++
		heap.Push(&n.queue, event{at: now.Add(delay), seq: n.seq, from: from, to: to, data: data, up: up})
	}
}

func (n *Network) buffer() []byte {
	if k := len(n.free); k > 0 {
		b := n.free[k-1]
		n.free = n.free[:k-1]
		return b[:0]
	}
	return nil
}

func (n *Network) blackedOut(now time.Time) bool {
	for _, b := range n.blackouts {
		if !now.Before(b[0]) && now.Before(b[1]) {
			return true
		}
	}
	return false
}

// lost draws the loss of one datagram.
func (n *Network) lost(dir int, imp *Impairment) bool {
	if g := imp.Burst; g != nil {
		if n.bad[dir] {
			n.bad[dir] = n.rng.Float64() >= g.BadToGood
		} else {
			n.bad[dir] = n.rng.Float64() < g.GoodToBad
		}
		p := g.LossGood
		if n.bad[dir] {
			p = g.LossBad
		}
		return n.rng.Float64() < p
	}
	return imp.Loss > 0 && n.rng.Float64() < imp.Loss
}

// Next is when the next datagram arrives (false: none in flight).
func (n *Network) Next() (time.Time, bool) {
	if len(n.queue) == 0 {
		return time.Time{}, false
	}
	return n.queue[0].at, true
}

// Deliver hands every datagram due by now to fn, in order of arrival.
// The bytes are valid only during the call. A reply to an outside
// address whose mapping is gone is dropped.
func (n *Network) Deliver(now time.Time, fn func(from, to netip.AddrPort, b []byte)) {
	for len(n.queue) > 0 && !n.queue[0].at.After(now) {
		e := heap.Pop(&n.queue).(event)
		c := &n.stats.Down
		if e.up {
			c = &n.stats.Up
		}
		to := e.to
		if !e.up {
			if in, ok := n.inside[to]; ok {
				to = in
			} else if n.retired[to] {
				n.stats.NATDrops++
				n.free = append(n.free, e.data)
				continue
			}
		}
		c.Delivered++
		c.BytesDelivered += uint64(len(e.data))
		fn(e.from, to, e.data)
		n.free = append(n.free, e.data)
	}
}

// event is a datagram in flight.
type event struct {
	at       time.Time
	seq      uint64
	from, to netip.AddrPort
	data     []byte
	up       bool
}

// eventQueue is a min-heap of events by arrival time, then send order
// (container/heap's methods below).
type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*q = old[:len(old)-1]
	return e
}
