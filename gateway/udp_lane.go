package gateway

import (
	"net/netip"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route"
	"github.com/edgemux/edgemux/sniff"
)

// Datagrams travel from a loop to a worker in batches, through the same
// SPSC ring and parker as the loop's connection events: one ring entry
// names a whole batch. Each (loop, worker) pair that carries datagrams has
// a lane: udp.queue batch buffers that the loop fills and the worker
// empties, and a second SPSC ring on which the worker hands each emptied
// buffer back. A buffer belongs to the loop while it is free or being
// filled and to the worker from the ring push that publishes it until the
// push that returns it, so neither side ever locks it, and nothing is
// allocated per datagram: the loop copies each datagram into the buffer's
// arena once, and the worker passes the batch's slice of
// protocols.Datagram to the handler as it is.

// batchTag marks a ring entry that names a datagram batch. A connection's
// entry is fd<<32 | gen with fd an int32 >= 0, so bit 63 is never set in
// one: the two can never be taken for each other.
const batchTag = uint64(1) << 63

// Batch buffer sizes. A batch holds up to batchItems datagrams in an arena
// of batchBytes (or one udp.max_datagram, if that is larger): about 93 KiB
// with its index (56 bytes a datagram), allocated when the loop first
// fills it. 512 datagrams of 128 bytes fill the arena.
const (
	batchBytes = 64 << 10
	batchItems = 512
)

func batchEntry(i int) uint64             { return batchTag | uint64(i) }
func isBatch(e uint64) bool               { return e&batchTag != 0 }
func batchIndex(e uint64) int             { return int(uint32(e)) }
func connEntry(fd int, gen uint32) uint64 { return uint64(fd)<<32 | uint64(gen) }

// dgramBatch is one batch buffer: datagrams in order of arrival, each with
// its class, their bytes in one arena.
type dgramBatch struct {
	arena []byte
	items []protocols.Datagram // Data points into arena
	class []sniff.DatagramClass
}

// fits reports whether a datagram of n bytes fits in the batch.
func (b *dgramBatch) fits(n int) bool {
	return len(b.items) < cap(b.items) && len(b.arena)+n <= cap(b.arena)
}

// add copies d into the arena; the caller checked fits.
func (b *dgramBatch) add(c sniff.DatagramClass, peer netip.AddrPort, d []byte) {
	off := len(b.arena)
	b.arena = append(b.arena, d...)
	end := len(b.arena)
	b.items = append(b.items, protocols.Datagram{Peer: peer, Data: b.arena[off:end:end]})
	b.class = append(b.class, c)
}

func (b *dgramBatch) reset() {
	b.arena = b.arena[:0]
	b.items = b.items[:0]
	b.class = b.class[:0]
}

// dgramLane is the datagram path from one loop to one worker.
type dgramLane struct {
	w       *worker
	batches []dgramBatch
	arena   int         // bytes per batch arena
	free    *route.Ring // batches the worker is done with: the worker pushes, the loop pops

	// The loop's own.
	cur    int  // the batch being filled; -1: none
	listed bool // in the loop's list of lanes with a batch to publish
	inline bool // the loop runs w itself: a batch is handled as it is published
}

// newLane makes a lane of queue batches to w, every one free.
func newLane(w *worker, queue, maxDatagram int, inline bool) (*dgramLane, error) {
	if inline {
		queue = 1 // handled at once: never more than one in hand
	}
	capacity := 2
	for capacity < queue {
		capacity <<= 1
	}
	free, err := route.NewRing(capacity)
	if err != nil {
		return nil, err
	}
	l := &dgramLane{w: w, batches: make([]dgramBatch, queue), arena: max(batchBytes, maxDatagram),
		free: free, cur: -1, inline: inline}
	for i := range queue {
		free.Push(uint64(i))
	}
	return l, nil
}

// batch is the batch the loop is filling, taking a free one when it has
// none; nil when the worker holds every one. Loop only.
func (l *dgramLane) batch() *dgramBatch {
	if l.cur < 0 {
		i, ok := l.free.Pop()
		if !ok {
			return nil
		}
		l.cur = int(i)
		if b := &l.batches[i]; b.arena == nil {
			b.arena = make([]byte, 0, l.arena)
			b.items = make([]protocols.Datagram, 0, batchItems)
			b.class = make([]sniff.DatagramClass, 0, batchItems)
		}
	}
	return &l.batches[l.cur]
}

// inFlight is how many of the lane's batches the worker holds. Loop only.
func (l *dgramLane) inFlight() int {
	n := len(l.batches) - l.free.Len()
	if l.cur >= 0 {
		n--
	}
	return n
}

// done hands batch i back to the loop. Worker only.
func (l *dgramLane) done(i int) {
	l.batches[i].reset()
	l.free.Push(uint64(i)) // never full: it has room for every batch
}
