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
// It is small on purpose (96 bytes, a test holds it there): an idle
// connection holds no buffers, and ticks are 32-bit worker ticks compared
// by difference, so they wrap safely (2^31 ticks of 100 ms is 6.8 years,
// far past any timeout).
type conn struct {
	w          *worker
	sess       protocols.Session
	peer       netip.AddrPort
	io         *connIO // buffers while input or output waits; nil while idle
	lastActive uint32  // worker tick of the last input
	idleTicks  uint32  // idle timeout in ticks; 0 = none
	timerDue   uint32  // worker tick of the session timer, when timerSet
	fd         int32
	gen        uint32
	notified   atomic.Uint32
	proto      sniff.Proto
	reason     uint8 // index into reasonNames
	closed     bool
	probing    bool // a silent peer we are probing; answered() ends it
	recorded   bool // already in the quarantine book
	timerSet   bool
}

// connIO is what a busy connection buffers: [ioIn] the input the session
// has not consumed yet, [ioOut] the output the socket has not taken yet.
type connIO [2][]byte

const (
	ioIn = iota
	ioOut
)

var _ protocols.Conn = (*conn)(nil)

func (c *conn) id() uint64               { return uint64(c.fd)<<32 | uint64(c.gen) }
func (c *conn) ID() uint64               { return c.id() }
func (c *conn) Peer() netip.AddrPort     { return c.peer }
func (c *conn) Reason() protocols.Reason { return reasonNames[c.reason] }
func (c *conn) Buffered() int            { return len(c.output()) }
func (c *conn) Notify()                  { c.w.notify(c) }
func (c *conn) CountDropped(n int)       { c.w.g.reg.CountDropped(int(c.fd), c.gen, n) }
func (c *conn) highWater() int           { return c.w.g.rt.Load().limits.OutputHighWater }
func (c *conn) slotWantsWrite(want bool) { c.w.g.reg.SetWantsWrite(int(c.fd), c.gen, want) }

// input and output are the buffered bytes, nil when there are none.
func (c *conn) input() []byte  { return c.buffered(ioIn) }
func (c *conn) output() []byte { return c.buffered(ioOut) }

func (c *conn) buffered(which int) []byte {
	if c.io == nil {
		return nil
	}
	return c.io[which]
}

// setInput and setOutput keep b (nil or empty: none) and let the buffers
// go once both are empty.
func (c *conn) setInput(b []byte)  { c.keep(ioIn, b) }
func (c *conn) setOutput(b []byte) { c.keep(ioOut, b) }

func (c *conn) keep(which int, b []byte) {
	if len(b) == 0 {
		b = nil
	}
	if c.io == nil {
		if b == nil {
			return
		}
		c.io = &connIO{}
	}
	c.io[which] = b
	if c.io[ioIn] == nil && c.io[ioOut] == nil {
		c.io = nil
	}
}

// ticks converts a duration to worker ticks, rounding up.
func ticks(d time.Duration) uint32 { return uint32((d + workerTick - 1) / workerTick) }

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
	out := c.output()
	if len(out) > 0 && len(out)+len(p) > c.highWater() {
		c.w.g.metrics.backpressure.Inc()
		return protocols.ErrBackpressure
	}
	if len(out) > 0 {
		c.setOutput(append(out, p...))
		return nil
	}
	n, err := writeFD(int(c.fd), p)
	if err != nil && !errors.Is(err, errAgain) {
		c.Close(err)
		return err
	}
	if n < len(p) {
		c.setOutput(append([]byte(nil), p[n:]...))
		if testHookWriteAgain != nil {
			testHookWriteAgain()
		}
		c.armWrite()
	}
	return nil
}

// testHookWriteAgain runs between a write's EAGAIN and the arm, where a
// peer that drains meanwhile raises the EPOLLOUT edge that armWrite must
// not lose; tests widen that window with it.
var testHookWriteAgain func()

// armWrite asks the loop to pass EPOLLOUT edges on, then flushes once
// more. The loop drops an edge that arrives while nobody waits to write,
// and edge-triggered epoll never repeats it: the peer may have drained
// the socket between the EAGAIN and the arm. The flush after the arm
// either makes that progress itself or meets EAGAIN again, and the edge
// for that one comes after the arm, so the loop passes it on.
func (c *conn) armWrite() {
	c.slotWantsWrite(true)
	c.flush()
}

// flush writes buffered output after an EPOLLOUT edge.
func (c *conn) flush() {
	out := c.output()
	for len(out) > 0 {
		n, err := writeFD(int(c.fd), out)
		out = out[n:]
		if errors.Is(err, errAgain) {
			c.setOutput(out)
			return
		}
		if err != nil {
			c.Close(err)
			return
		}
	}
	c.setOutput(nil)
	c.slotWantsWrite(false)
}

// answered ends the probe window: the peer spoke, so the pool's own idle
// timeout applies from now on.
func (c *conn) answered() {
	c.probing = false
	c.idleTicks = 0
	if idle := c.w.pool.idle; idle > 0 {
		c.idleTicks = ticks(idle)
	}
}

// Close flushes what the socket takes without waiting, closes the socket,
// and tells the session once.
func (c *conn) Close(reason error) {
	if c.closed {
		return
	}
	c.closed = true
	if out := c.output(); len(out) > 0 {
		writeFD(int(c.fd), out) // best effort: the peer may have gone
	}
	c.io = nil
	w := c.w
	if w.conns[c.fd] == c {
		w.conns[c.fd] = nil
	}
	w.g.closeConn(int(c.fd), c.gen)
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
		c.timerSet = false
		return
	}
	due := c.w.ticks + uint64(ticks(d))
	if c.timerSet && c.timerDue == uint32(due) {
		return
	}
	c.timerDue, c.timerSet = uint32(due), true
	c.w.wheel.add(c.id(), due, timerSession)
}
