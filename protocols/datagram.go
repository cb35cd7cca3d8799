package protocols

import (
	"net/netip"
	"time"
)

// The datagram side of the shared port. Datagrams are classified on the
// epoll loops (sniff.ClassifyDatagram) and handed, in batches, to the
// workers of the pool that serves their class, through the same rings
// and parkers as TCP events. A DatagramHandler says which worker owns a
// datagram (Route, on the loop), so every datagram of one session reaches
// the same worker, and keeps its per-worker state in a DatagramWorker that
// only that worker's goroutine calls: no locks.

// Datagram is one received UDP datagram.
type Datagram struct {
	Peer netip.AddrPort // the source address
	Data []byte         // valid only during the call that receives it
}

// DatagramOut sends datagrams from a worker. Send copies b; the worker
// sends what was queued in batches (sendmmsg) when the call that queued
// it returns, from the shared port. Only the worker's goroutine may call
// it: from Datagrams or Tick. A datagram it cannot send (empty, longer
// than udp.max_datagram, to an address family the port does not speak)
// is an error and is not queued; one the kernel drops later (a full send
// buffer) is counted by the gateway, as a datagram lost on the way.
type DatagramOut interface {
	Send(peer netip.AddrPort, b []byte) error
	// Wake asks the worker to call the DatagramWorker's Woken soon (it
	// must implement DatagramWaker; otherwise Wake does nothing). It is
	// safe from any goroutine, for sessions fed from elsewhere (a bus
	// subscription); calls that come before the worker gets to it
	// coalesce into one, so the handler keeps its own list of what
	// wants service.
	Wake()
}

// DatagramHandler serves one class of datagrams (the reliable UDP core,
// CoAP) on the workers of a pool. It must be safe for concurrent use;
// per-worker state lives in the DatagramWorker.
type DatagramHandler interface {
	// Route picks the worker, 0..workers-1, that owns d: the same one
	// for every datagram of a session, whatever its source address
	// (a NAT may rebind it). It runs on an epoll loop for every
	// datagram: pure, cheap, no allocation. Under the inline dispatch
	// policy each loop runs its own worker and Route is not asked: a
	// datagram goes to the worker of the loop whose socket took it (the
	// kernel's hash of the 4-tuple), so a rebound peer may reach another.
	Route(peer netip.AddrPort, d []byte, workers int) int
	// Worker starts the state of worker index (of workers); out sends
	// from that worker.
	Worker(index, workers int, out DatagramOut) DatagramWorker
}

// DatagramWorker is a DatagramHandler's state on one worker; only that
// worker's goroutine calls it.
type DatagramWorker interface {
	// Datagrams handles a batch that arrived for this worker, in order
	// of arrival. The bytes are valid only during the call.
	Datagrams(batch []Datagram, now time.Time)
	// Tick runs the worker's timers and returns how long until it needs
	// the next Tick (0: no timer pending). The worker calls Tick again no
	// later than that (to about a millisecond: retransmission timers of
	// tens of milliseconds depend on it), and at least every second. It
	// also calls Tick right after Datagrams, so a timer that Datagrams
	// armed counts from then: Tick may come before its deadline and must
	// then only report the wait that is left.
	Tick(now time.Time) time.Duration
	// Close releases everything: the gateway stops.
	Close()
}

// DatagramWaker is implemented by DatagramWorkers that use
// DatagramOut.Wake.
type DatagramWaker interface {
	// Woken runs on the worker after one or more Wake calls.
	Woken(now time.Time)
}

// DatagramIdler is implemented by DatagramWorkers that can tell when what
// comes to them is upkeep only (an idle fleet's keepalives), which may
// wait: while every datagram worker of the gateway says so, the loops
// read the UDP sockets every udp.receive_delay_idle instead of every
// udp.receive_delay (fewer wakeups for the same datagrams). A worker
// without it counts as idle a second after its last datagram.
type DatagramIdler interface {
	// Idle reports whether none of the worker's sessions has carried
	// data (or opened) lately: anything that arrives now is only
	// keepalives, or the first word after a quiet spell. The worker asks
	// after each Tick.
	Idle(now time.Time) bool
}

// DatagramDrainer is implemented by DatagramWorkers whose sessions have
// something to tell their peers when the gateway drains (the private
// protocol's GOING_AWAY, say). The worker calls Drain once when the drain
// begins and keeps calling Datagrams, Tick and Woken, so goodbyes can be
// acknowledged and retransmitted, until Drained reports true on every
// worker or the grace ends; then Close.
type DatagramDrainer interface {
	Drain(now time.Time)
	// Drained reports whether every session has ended; the worker asks
	// after each Tick while it drains.
	Drained() bool
}
