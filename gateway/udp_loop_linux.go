package gateway

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/sniff"
)

// The loop's side of the datagram path: drain the UDP socket, classify
// each datagram, ask the class's handler which worker owns it, copy it
// into that worker's lane, and publish the lane's batches on the worker's
// ring.

// udpPerWakeup is how many datagrams a loop reads before it serves its
// other events; it comes back for the rest in the same turn of its loop
// (the socket is edge-triggered: no new edge would tell it).
const udpPerWakeup = 1024

// numClasses counts sniff's datagram classes: unknown, CoAP, RUDP.
const numClasses = int(sniff.DatagramRUDP) + 1

// dgramRoute is where the datagrams of one class go on this loop: the
// handler that picks the worker, and the lane to each of the pool's
// workers by pool-local index; under the inline policy, the one lane to
// the loop's own worker for the pool.
type dgramRoute struct {
	h      protocols.DatagramHandler
	lanes  []*dgramLane
	inline *dgramLane
}

// testHookUDPDrain runs when a loop starts to drain its UDP socket; tests
// hold the loop there so datagrams pile up in the socket.
var testHookUDPDrain func()

// drainUDP reads the loop's UDP socket until a recvmmsg comes back short
// of its batch, or for udpPerWakeup datagrams, and hands what it read to
// the workers; it returns how many datagrams it read.
func (l *loop) drainUDP() (read int) {
	if testHookUDPDrain != nil {
		testHookUDPDrain()
	}
	u := l.udp
	defer l.publishDatagrams(l.ahead)
	for range max(1, udpPerWakeup/len(u.msgs)) {
		n, err := u.recv()
		if err != nil {
			if !errors.Is(err, unix.EBADF) {
				l.g.log.Warn("udp", "loop", l.idx, "err", err)
			}
			return read
		}
		if n == 0 {
			return read
		}
		read += n
		l.routeDatagrams(u, n)
		l.publishDatagrams(1)
		if n < len(u.msgs) {
			// The queue held no more when the kernel filled the batch:
			// a call to see EAGAIN would be one more syscall for nothing,
			// and a datagram that came since raises an edge of its own
			// (the socket's wakeup runs at every datagram it queues).
			return read
		}
	}
	l.udpAgain = true
	return read
}

// routeDatagrams sorts the n datagrams recv read into their workers'
// lanes, counting what it drops and why.
func (l *loop) routeDatagrams(u *udpSocket, n int) {
	var t udpTally
	for i := range n {
		d, truncated := u.datagram(i)
		if truncated {
			t.drops[dropTruncated]++
			continue
		}
		c := sniff.ClassifyDatagram(d)
		t.received[c]++
		r := l.dgRoutes[c]
		if r == nil {
			t.drops[dropUnrouted]++
			continue
		}
		peer := u.peer(i)
		lane := r.inline
		if lane == nil {
			wi, ok := l.routeOne(r, peer, d)
			if !ok {
				t.drops[dropRoute]++
				continue
			}
			lane = r.lanes[wi]
		}
		if !l.enqueue(lane, c, peer, d) {
			t.drops[dropQueueFull]++
		}
	}
	l.g.udpStats.add(&t)
}

// routeOne asks the handler which worker owns d. A panic in Route, or an
// index outside the pool, drops the datagram and is logged; the loop
// lives on.
func (l *loop) routeOne(r *dgramRoute, peer netip.AddrPort, d []byte) (wi int, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			l.g.metrics.panics.Inc()
			if l.routePanics++; logWorthy(l.routePanics) {
				l.g.log.Error("datagram handler Route panicked", "peer", peer.String(), "panic", fmt.Sprint(p), "times", l.routePanics)
			}
			ok = false
		}
	}()
	wi = r.h.Route(peer, d, len(r.lanes))
	return wi, wi >= 0 && wi < len(r.lanes)
}

// enqueue copies d into the batch the lane is filling; a full batch is
// published and the next one taken. It reports false when the worker
// holds every batch of the lane: the datagram is dropped.
func (l *loop) enqueue(lane *dgramLane, c sniff.DatagramClass, peer netip.AddrPort, d []byte) bool {
	b := lane.batch()
	if b == nil {
		return false
	}
	if !b.fits(len(d)) {
		l.publish(lane)
		if b = lane.batch(); b == nil {
			return false
		}
	}
	b.add(c, peer, d)
	if !lane.listed {
		lane.listed = true
		l.dirty = append(l.dirty, lane)
	}
	return true
}

// publishDatagrams hands the filled batches of the lanes whose worker
// holds fewer than limit of their batches to those workers. After each
// recvmmsg the limit is 1: a worker with nothing in hand gets its
// datagrams at once. After a drain, and at each turn of the loop while
// batches wait, it is l.ahead (half of udp.queue): a busy worker gets a
// few batches ahead, and then fewer, fuller ones (fewer ring entries and
// handler calls per datagram) rather than the queue in small batches and
// drops; a batch that fills up goes at once (enqueue). The loop turns
// every millisecond while batches wait (run), so the one a busy worker
// will want next waits for it at most that long.
func (l *loop) publishDatagrams(limit int) {
	keep := l.dirty[:0]
	for _, lane := range l.dirty {
		switch {
		case lane.cur < 0 || len(lane.batches[lane.cur].items) == 0:
			lane.listed = false
		case lane.inFlight() < limit:
			l.publish(lane)
			lane.listed = false
		default:
			keep = append(keep, lane)
		}
	}
	clear(l.dirty[len(keep):])
	l.dirty = keep
}

// publish gives the lane's current batch to its worker: through the ring
// (or the loop's backlog when the ring is full, as for connection events)
// with a wakeup, or, when the loop runs the worker itself, by handling it
// now.
func (l *loop) publish(lane *dgramLane) {
	i := lane.cur
	if i < 0 {
		return
	}
	if lane.inline {
		lane.w.dg.handleBatch(&lane.batches[i], time.Now())
		lane.batches[i].reset()
		return // the batch stays current: it is free again
	}
	lane.cur = -1
	wi := lane.w.idx
	id := batchEntry(i)
	if len(l.backlog[wi]) > 0 || !l.rings[wi].Push(id) {
		l.backlog[wi] = append(l.backlog[wi], id)
		l.g.metrics.ringFull.Inc()
	}
	if lane.w.wake() {
		l.woke = true
	}
}
