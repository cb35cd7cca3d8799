package gateway

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/sniff"
)

// conn is a worker-owned connection: the protocols.Conn that sessions see.
// It is small on purpose; an idle connection holds no buffers.
type conn struct {
	w          *worker
	sess       protocols.Session
	peer       netip.AddrPort
	in         []byte // input the session has not consumed yet
	out        []byte // output the socket has not taken yet
	lastActive uint64 // worker ticks
	idleTicks  uint64
	timerDue   uint64 // worker tick of the session timer; 0 = none
	fd         int
	gen        uint32
	notified   atomic.Uint32
	proto      sniff.Proto
	reason     protocols.Reason
	closed     bool
	probing    bool // a silent peer we are probing; answered() ends it
	recorded   bool // already in the quarantine book
}

var _ protocols.Conn = (*conn)(nil)

func (c *conn) id() uint64               { return uint64(c.fd)<<32 | uint64(c.gen) }
func (c *conn) ID() uint64               { return c.id() }
func (c *conn) Peer() netip.AddrPort     { return c.peer }
func (c *conn) Reason() protocols.Reason { return c.reason }
func (c *conn) Buffered() int            { return len(c.out) }
func (c *conn) Notify()                  { c.w.notify(c) }
func (c *conn) highWater() int           { return c.w.g.rt.Load().limits.OutputHighWater }
func (c *conn) slotWantsWrite(want bool) { c.w.g.reg.Slot(c.fd).WantWrite.Store(b2u(want)) }

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// Write sends p now when the socket takes it and buffers the rest. While
// output is already waiting, a write that would take the buffer past the
// high-water mark writes nothing and returns ErrBackpressure, so a frame is
// never cut in half. A write to an empty buffer always goes ahead, so one
// message larger than the mark (bounded by its protocol's own limit) can
// still be sent to a peer that keeps up.
func (c *conn) Write(p []byte) error {
	if c.closed {
		return protocols.ErrClosed
	}
	if len(c.out) > 0 && len(c.out)+len(p) > c.highWater() {
		c.w.g.metrics.backpressure.Inc()
		return protocols.ErrBackpressure
	}
	if len(c.out) > 0 {
		c.out = append(c.out, p...)
		return nil
	}
	n, err := writeFD(c.fd, p)
	if err != nil && !errors.Is(err, errAgain) {
		c.Close(err)
		return err
	}
	if n < len(p) {
		c.out = append(c.out, p[n:]...)
		c.slotWantsWrite(true)
	}
	return nil
}

// flush writes buffered output after an EPOLLOUT edge.
func (c *conn) flush() {
	for len(c.out) > 0 {
		n, err := writeFD(c.fd, c.out)
		if errors.Is(err, errAgain) {
			return
		}
		if err != nil {
			c.Close(err)
			return
		}
		c.out = c.out[n:]
	}
	c.out = nil
	c.slotWantsWrite(false)
}

// answered ends the probe window: the peer spoke, so the pool's own idle
// timeout applies from now on.
func (c *conn) answered() {
	c.probing = false
	idle := c.w.pool.idle
	c.idleTicks = uint64((idle + workerTick - 1) / workerTick)
	if idle <= 0 {
		c.idleTicks = 1 << 62
	}
}

// Close flushes what the socket takes without waiting, closes the socket,
// and tells the session once.
func (c *conn) Close(reason error) {
	if c.closed {
		return
	}
	c.closed = true
	if len(c.out) > 0 {
		writeFD(c.fd, c.out) // best effort: the peer may have gone
		c.out = nil
	}
	c.in = nil
	w := c.w
	if w.conns[c.fd] == c {
		w.conns[c.fd] = nil
	}
	w.g.closeConn(c.fd, c.gen)
	w.pool.release(w.local)
	w.g.metrics.closed(c.proto, reason)
	if c.sess != nil {
		sess := c.sess
		w.safe(c, nil, func() error { sess.Closed(reason); return nil })
	}
}

// SetTimer arms the session timer on the worker's wheel; a replaced timer
// stays in the wheel and is ignored when it fires (its due tick differs).
func (c *conn) SetTimer(d time.Duration) {
	if c.closed || d <= 0 {
		c.timerDue = 0
		return
	}
	due := c.w.ticks + uint64((d+workerTick-1)/workerTick)
	if due == c.timerDue {
		return
	}
	c.timerDue = due
	c.w.wheel.add(c.id(), due, timerSession)
}
