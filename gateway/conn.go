package gateway

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/sniff"
)

// conn is a worker-owned connection: the protocols.Conn that sessions see.
// It is small on purpose (80 bytes, a size class of the allocator; a test
// holds it there): an idle connection holds no buffers; the peer is kept
// as 16 address bytes and a port (a netip.AddrPort is 32 bytes, and accept
// gives no zone to keep); ticks are 32-bit worker ticks compared by
// difference, so they wrap safely (2^31 ticks of 100 ms is 6.8 years, far
// past any timeout), and a session timer's due tick of 0 means none.
type conn struct {
	w          *worker
	sess       protocols.Session
	io         *connIO  // buffers while input or output waits; nil while idle
	peerIP     [16]byte // IPv4 mapped into IPv6, as accept gave it unmapped
	peerPort   uint16
	proto      sniff.Proto
	reason     uint8  // index into reasonNames
	lastActive uint32 // worker tick of the last input
	idleTicks  uint32 // idle timeout in ticks; 0 = none
	timerDue   uint32 // worker tick of the session timer; 0 = none set
	fd         int32
	gen        uint32
	notified   atomic.Uint32
	closed     bool
	probing    bool // a silent peer we are probing; answered() ends it
	lingering  bool // closed for the session, flushing to the peer while the gateway drains
	recorded   bool // already in the quarantine book
}

func newConn(w *worker, fd int, gen uint32, peer netip.AddrPort, proto sniff.Proto, reason uint8) *conn {
	return &conn{w: w, fd: int32(fd), gen: gen, peerIP: peer.Addr().As16(), peerPort: peer.Port(), proto: proto, reason: reason}
}

// connIO is what a busy connection buffers: the input the session has not
// consumed yet, and the output the socket has not taken yet. The output is
// bytes of the connection's own (out), then frames kept by reference
// (refs): read-only encodings that other connections' outputs hold too
// (WriteShared), so a fan-out's leftovers cost a slice header per frame
// per connection, not the frame's bytes.
type connIO struct {
	in, out []byte
	refs    [][]byte
	refN    int // bytes in refs
}

var _ protocols.Conn = (*conn)(nil)

func (c *conn) id() uint64               { return uint64(c.fd)<<32 | uint64(c.gen) }
func (c *conn) ID() uint64               { return c.id() }
func (c *conn) Reason() protocols.Reason { return reasonNames[c.reason] }
func (c *conn) Notify()                  { c.w.notify(c) }
func (c *conn) CountDropped(n int)       { c.w.g.reg.CountDropped(int(c.fd), c.gen, n) }
func (c *conn) highWater() int           { return c.w.g.rt.Load().limits.OutputHighWater }
func (c *conn) slotWantsWrite(want bool) { c.w.g.reg.SetWantsWrite(int(c.fd), c.gen, want) }

func (c *conn) Peer() netip.AddrPort {
	if c.peerIP == ([16]byte{}) && c.peerPort == 0 {
		return netip.AddrPort{} // none was given (a test's conn)
	}
	return netip.AddrPortFrom(netip.AddrFrom16(c.peerIP).Unmap(), c.peerPort)
}

// live reports whether the worker still does I/O on c: open, or closed
// for its session but lingering.
func (c *conn) live() bool { return !c.closed || c.lingering }

// input is the buffered input, nil when there is none.
func (c *conn) input() []byte {
	if c.io == nil {
		return nil
	}
	return c.io.in
}

// Buffered is how many output bytes wait for the socket, own and shared.
func (c *conn) Buffered() int {
	if c.io == nil {
		return 0
	}
	return len(c.io.out) + c.io.refN
}

// setInput keeps b (nil or empty: none) and lets the buffers go once
// nothing is buffered.
func (c *conn) setInput(b []byte) {
	if len(b) == 0 {
		b = nil
	}
	if c.buffers(b != nil) {
		c.io.in = b
		c.tidy()
	}
}

// buffers makes sure c has its buffers when it is to keep something; it
// reports whether c has them.
func (c *conn) buffers(keep bool) bool {
	if c.io == nil && keep {
		c.io = &connIO{}
	}
	return c.io != nil
}

// tidy lets the buffers go once nothing is buffered.
func (c *conn) tidy() {
	if io := c.io; io.in == nil && io.out == nil && len(io.refs) == 0 {
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
func (c *conn) Write(p []byte) error { return c.write(p, nil) }

// WriteShared is Write for p made of frames (protocols.SharedWriter): what
// the socket does not take is kept as references to the frames that other
// connections share, and as a copy of those that lie in p.
func (c *conn) WriteShared(p []byte, frames [][]byte) error { return c.write(p, frames) }

// write is Write, and WriteShared for frames not nil.
func (c *conn) write(p []byte, frames [][]byte) error {
	if c.closed {
		return protocols.ErrClosed
	}
	if len(p) == 0 {
		return nil
	}
	if queued := c.Buffered(); queued > 0 {
		if queued+len(p) > c.highWater() {
			c.w.g.metrics.backpressure.Inc()
			return protocols.ErrBackpressure
		}
		c.queue(p, frames, 0)
		return nil
	}
	n, err := writeFD(int(c.fd), p)
	if err != nil && !errors.Is(err, errAgain) {
		c.Close(err)
		return err
	}
	if n < len(p) {
		c.queue(p, frames, n)
		c.wroteShort()
	}
	return nil
}

// queue buffers what the socket did not take of a write, p less its first
// skip bytes, behind what waits already.
func (c *conn) queue(p []byte, frames [][]byte, skip int) {
	switch {
	case frames != nil:
		c.keepFrames(p, frames, skip)
	case c.io != nil && len(c.io.refs) > 0: // behind the shared frames, a copy of its own
		c.io.refs = append(c.io.refs, append([]byte(nil), p[skip:]...))
		c.io.refN += len(p) - skip
	default:
		c.buffers(true)
		c.io.out = append(c.io.out, p[skip:]...)
	}
}

// keepFrames queues frames, less their first skip bytes (the socket took
// those): the shared ones by reference, and those that lie in p (the
// caller's own bytes, which it reuses) copied, into one allocation.
func (c *conn) keepFrames(p []byte, frames [][]byte, skip int) {
	c.buffers(true)
	rest := func(yield func(f []byte, mine bool)) {
		left := skip
		for _, f := range frames {
			if left >= len(f) {
				left -= len(f)
				continue
			}
			f, left = f[left:], 0
			yield(f, inside(p, f))
		}
	}
	ownN := 0
	rest(func(f []byte, mine bool) {
		if mine {
			ownN += len(f)
		}
	})
	own := make([]byte, 0, ownN)
	rest(func(f []byte, mine bool) {
		if mine {
			at := len(own)
			own = append(own, f...)
			f = own[at:len(own):len(own)]
		}
		c.io.refs = append(c.io.refs, f)
		c.io.refN += len(f)
	})
	if testHookKeptFrames != nil {
		testHookKeptFrames(c.id(), c.io.refs)
	}
}

// inside reports whether f lies in p's array.
func inside(p, f []byte) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(f)))
	return at >= start && at < start+uintptr(cap(p))
}

// testHookKeptFrames sees a connection's frames kept by reference, on its
// worker, each time more are kept.
var testHookKeptFrames func(conn uint64, refs [][]byte)

// wroteShort follows a write the socket did not take all of.
func (c *conn) wroteShort() {
	if testHookWriteAgain != nil {
		testHookWriteAgain()
	}
	c.armWrite()
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

// flush writes buffered output after an EPOLLOUT edge. Once a lingering
// connection's output is out, its write side is shut.
func (c *conn) flush() {
	if c.io != nil {
		if err := c.writeBuffered(); err != nil {
			if !errors.Is(err, errAgain) {
				c.fail(err)
			}
			return
		}
	}
	c.slotWantsWrite(false)
	if c.lingering {
		c.shutWrite()
	}
}

// writeBuffered writes the buffered output until the socket takes no
// more (errAgain) or all of it is out; the shared frames go with writev,
// up to the system's iovec limit a call.
func (c *conn) writeBuffered() error {
	io := c.io
	for len(io.out) > 0 {
		n, err := writeFD(int(c.fd), io.out)
		io.out = io.out[n:]
		if err != nil {
			return err
		}
	}
	io.out = nil
	for len(io.refs) > 0 {
		n, err := writevFD(int(c.fd), io.refs[:min(len(io.refs), maxIovecs)], &c.w.iovecs)
		io.refN -= n
		for n > 0 { // drop what was written, the socket took n bytes
			if n < len(io.refs[0]) {
				io.refs[0] = io.refs[0][n:]
				break
			}
			n -= len(io.refs[0])
			io.refs[0] = nil
			io.refs = io.refs[1:]
		}
		if err != nil {
			return err
		}
	}
	io.refs = nil
	c.tidy()
	return nil
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

// Close ends the connection for its session, which is told once, and
// closes the socket after writing what the socket takes of the buffered
// output now. While the gateway drains, a connection the peer has not
// closed lingers instead, so that the peer gets all of it (linger).
func (c *conn) Close(reason error) {
	if c.closed {
		return
	}
	c.closed = true
	w := c.w
	w.g.metrics.closed(c.proto, reason)
	c.lingering = w.draining && !w.stopping && !socketGone(reason)
	if c.sess != nil {
		sess := c.sess
		w.safe(c, nil, func() error { sess.Closed(reason); return nil })
	}
	if !c.lingering {
		c.release()
		return
	}
	if c.Buffered() == 0 {
		c.shutWrite()
	} // else flush shuts it once the output is out
	c.setInput(nil)
	w.discard(c, true)
}

// socketGone reports whether reason says the peer or the socket is gone
// already, so there is nobody to linger for.
func socketGone(reason error) bool {
	var errno unix.Errno
	return errors.Is(reason, protocols.ErrPeerClosed) || errors.As(reason, &errno)
}

// fail ends the connection after a socket error: a lingering one is
// released, any other closed.
func (c *conn) fail(err error) {
	if c.closed {
		c.release()
		return
	}
	c.Close(err)
}

// shutWrite sends FIN after the last byte written: the peer reads all of
// the output, then EOF, and its own close is what releases the socket.
// Closing with unread input would send RST instead, and RST can destroy a
// goodbye the peer has not read yet.
func (c *conn) shutWrite() { unix.Shutdown(int(c.fd), unix.SHUT_WR) }

// release closes the socket and frees the connection's registry slot and
// fd table entry; the session has been told already. Releases during a
// drain are counted for the drain's log line: cut when the grace ended,
// closed otherwise.
func (c *conn) release() {
	w := c.w
	if w.fds.conn(int(c.fd)) != c {
		return // released already
	}
	c.lingering = false
	if c.io != nil {
		c.writeBuffered() // best effort: the peer may have gone
	}
	c.io = nil
	w.fds.setConn(int(c.fd), nil)
	w.g.closeConn(int(c.fd), c.gen)
	w.unplace(c)
	switch {
	case w.stopping:
		w.g.drainCut.Add(1)
	case w.draining:
		w.g.drainClosed.Add(1)
	}
}

// SetTimer arms the session timer on the worker's wheel. A replaced or
// cancelled timer's entry is taken out of the wheel, so that an idle
// connection whose session cancelled its timer (a private session at
// HELLO) holds no entry for it; one that cannot be found (its bucket is
// being walked) fires and is ignored, its due tick no longer c's.
func (c *conn) SetTimer(d time.Duration) {
	if c.closed || d <= 0 {
		c.cancelTimer()
		return
	}
	due := c.w.ticks + uint64(ticks(d))
	if uint32(due) == 0 {
		due++ // 0 is "none": once in 2^32 ticks, a timer one tick late
	}
	if c.timerDue == uint32(due) {
		return
	}
	c.cancelTimer()
	c.timerDue = uint32(due)
	c.w.wheel.add(c.id(), due, timerSession)
}

// cancelTimer removes c's session timer, if one is set, from the wheel.
// The entry's full due tick is rebuilt from its low 32 bits: it lies
// within a wheel turn after the worker's tick.
func (c *conn) cancelTimer() {
	if c.timerDue == 0 {
		return
	}
	now := c.w.ticks
	due := now + uint64(c.timerDue-uint32(now))
	c.timerDue = 0
	c.w.wheel.remove(c.id(), due, timerSession)
}
