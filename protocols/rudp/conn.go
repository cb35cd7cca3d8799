package rudp

import (
	"crypto/cipher"
	"net/netip"
	"time"
)

// State is a session's life stage.
type State uint8

// The states.
const (
	StateHandshake   State = iota // client: waiting for ACCEPT
	StateEstablished              // both: data flows
	StateClosing                  // a CLOSE is queued; sent by the next AppendDatagram
	StateClosed                   // gone; Err says why
)

var stateNames = [...]string{"handshake", "established", "closing", "closed"}

// String names the state.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "invalid"
}

// Stats counts what happened on one session.
type Stats struct {
	PacketsSent, PacketsReceived uint64
	BytesSent, BytesReceived     uint64 // whole datagrams
	Retransmits                  uint64 // fragments sent again
	ProbesSent                   uint64 // tail loss probes and keepalives
	RTOs                         uint64
	Duplicates                   uint64 // packets or fragments received twice
	Malformed                    uint64 // packets dropped for a bad frame
	Integrity                    uint64 // packets that failed the CRC or AEAD
	AcksRejected                 uint64 // ACK frames acknowledging what was never sent
	DatagramsDropped             uint64 // unreliable messages lost to a full queue
	OutOfWindow                  uint64 // fragments past the receive window
	PathChallenges               uint64
	Migrations                   uint64 // new paths validated
}

// Conn is one session, on either side. Its methods are called from one
// goroutine: the owning worker's, or the client's.
type Conn struct {
	// What an idle session's keepalive reads and writes comes first, on
	// as few cache lines as it fits: at 100,000 idle sessions each line a
	// keepalive touches is a cache miss (BenchmarkKeepalive/*/100000).
	cfg           *Config
	ep            *Endpoint // server side only
	client        bool
	confirmed     bool // server: the client has used the session id
	inReady       bool
	peerClosed    bool // a CLOSE came; the session ends once what came before it is read
	state         State
	ackPending    bool // an ACK is owed
	ackNow        bool // send it without delay
	ackLazy       bool // only an idle session's keepalive asked for it: it may wait pingAckDelay
	windowUpdated bool // the window opened since the last ACK
	pingPending   bool // a keepalive that asks for an answer (PING) is due
	nudgePending  bool // a keepalive that asks for none (PADDING) is due
	pingRetries   uint8
	acceptSend    bool // server: an ACCEPT is owed
	closeCode     uint16

	lastHeard, lastSent, lastAckEliciting int64
	lastData                              int64 // a DATA frame sent or received
	ackFirstAt                            int64 // when the oldest unacknowledged ack-eliciting packet came
	ackEliciting                          int   // ack-eliciting packets since the last ACK sent
	pingSentAt, pingWaitAt                int64
	appTimerAt                            int64 // SetTimer's deadline; 0: none
	idleTimeout, keepAlive                time.Duration
	readyNext                             *Conn

	rx      replayWindow
	recvKey cipher.AEAD // sealed mode; nil in plain mode
	nextPN  uint64
	id      uint64
	timer   timerNode
	stats   Stats
	path    pathState

	// The rest, in no order that matters.
	err   error
	nonce uint64 // the client's handshake nonce
	epoch time.Time
	pool  *bufPool

	// Negotiated parameters.
	maxDatagram, fragSize, maxMessage int

	// Sealed mode: nil in plain mode.
	sendKey  cipher.AEAD
	nonceBuf aeadNonce

	snd       sendQueue
	peerLimit uint64 // the peer accepts fragments below this
	rcv       recvQueue
	dgramOut  dgramQueue
	dgramIn   dgramQueue
	rtt       rttState
	cc        congestion
	loss      lossState

	closeReason string
	value       any // SetValue's

	// Endpoint bookkeeping.
	handshake handshakeKey // server: the entry in the handshake index, until confirmed
	createdAt int64        // server: when the session was made
}

// dgramQueue is a bounded FIFO of unreliable messages.
type dgramQueue struct {
	bufs       [][]byte
	head, size int
}

func (q *dgramQueue) push(b []byte, limit int) bool {
	if q.size >= limit {
		return false
	}
	if q.size == len(q.bufs) {
		q.grow(min(max(4, 2*len(q.bufs)), limit))
	}
	q.bufs[(q.head+q.size)%len(q.bufs)] = b
	q.size++
	return true
}

// grow re-lays the ring in a slice of n: it starts small and grows to
// the limit only for sessions that queue that many.
func (q *dgramQueue) grow(n int) {
	bufs := make([][]byte, n)
	for i := 0; i < q.size; i++ {
		bufs[i] = q.bufs[(q.head+i)%len(q.bufs)]
	}
	q.bufs, q.head = bufs, 0
}

// shrink drops the ring of an idle session.
func (q *dgramQueue) shrink() {
	if q.size == 0 {
		q.bufs, q.head = nil, 0
	}
}

func (q *dgramQueue) peek() []byte { return q.bufs[q.head] }

func (q *dgramQueue) pop() []byte {
	b := q.bufs[q.head]
	q.bufs[q.head] = nil
	q.head = (q.head + 1) % len(q.bufs)
	q.size--
	return b
}

func (q *dgramQueue) clear(pool *bufPool) {
	for q.size > 0 {
		pool.put(q.pop())
	}
	q.bufs, q.head = nil, 0
}

// nanos converts a caller's time to the session's clock.
func (c *Conn) nanos(now time.Time) int64 { return int64(now.Sub(c.epoch)) }

// init sets up what both sides share once the parameters are known.
func (c *Conn) init(maxDatagram, peerWindow int, idle time.Duration) {
	c.maxDatagram = maxDatagram
	c.fragSize = fragmentSize(maxDatagram)
	c.maxMessage = min(c.cfg.MaxMessage, peerWindow/2*c.fragSize)
	c.idleTimeout = idle
	c.keepAlive = min(c.cfg.KeepAlive, idle/3)
	c.peerLimit = uint64(peerWindow)
	c.rcv.window = uint64(c.cfg.Window)
	c.rtt.init(c.cfg.InitialRTT)
	c.cc.init(maxDatagram)
}

// ID is the session id (zero on a client before the handshake ends).
func (c *Conn) ID() uint64 { return c.id }

// State is the session's stage.
func (c *Conn) State() State { return c.state }

// Err is why the session closed (nil while it lives).
func (c *Conn) Err() error { return c.err }

// Peer is where the session sends: the validated address, or the new one
// being validated.
func (c *Conn) Peer() netip.AddrPort { return c.path.sendAddr() }

// Stats returns the session's counters.
func (c *Conn) Stats() Stats { return c.stats }

// SRTT is the smoothed round-trip time.
func (c *Conn) SRTT() time.Duration { return c.rtt.smoothed() }

// MaxMessage is the largest message Send accepts on this session.
func (c *Conn) MaxMessage() int {
	if c.maxMessage == 0 {
		return c.cfg.MaxMessage
	}
	return c.maxMessage
}

// Buffered is how many reliable bytes wait to be sent or acknowledged.
func (c *Conn) Buffered() int { return c.snd.bytes }

// Send queues msg as one reliable message, delivered once and in order.
// It copies msg. It fails with ErrTooLarge, ErrQueueFull (the peer does
// not keep up: back off), ErrMemory (the endpoint's budget is spent) or
// ErrClosed.
func (c *Conn) Send(msg []byte) error {
	if c.state >= StateClosing || c.peerClosed {
		return ErrClosed
	}
	if len(msg) > c.MaxMessage() {
		return ErrTooLarge
	}
	frag := c.fragSize
	if frag == 0 {
		frag = fragmentSize(c.cfg.MaxDatagram) // a client before ACCEPT
	}
	n := max(1, (len(msg)+frag-1)/frag)
	if c.snd.bytes+len(msg)+n*minCharge > c.cfg.SendQueue {
		return ErrQueueFull
	}
	for i := 0; i < n; i++ {
		part := msg[min(i*frag, len(msg)):min((i+1)*frag, len(msg))]
		buf, ok := c.pool.get(len(part))
		if !ok {
			c.unqueue(i)
			return ErrMemory
		}
		copy(buf, part)
		var flags uint8
		if i == 0 {
			flags |= fragFirst
		}
		if i == n-1 {
			flags |= fragLast
		}
		c.snd.push(buf, flags)
	}
	c.changed()
	return nil
}

// unqueue takes back the last n fragments pushed (a Send that ran out of
// memory halfway).
func (c *Conn) unqueue(n int) {
	for ; n > 0; n-- {
		c.snd.end--
		f := c.snd.at(c.snd.end)
		c.snd.bytes -= charge(len(f.buf))
		c.pool.put(f.buf)
		*f = sendFrag{}
	}
}

// SendUnreliable queues msg as one unreliable datagram: sent once, maybe
// lost, never fragmented (ErrTooLarge past one datagram's room). A full
// queue refuses it with ErrQueueFull.
func (c *Conn) SendUnreliable(msg []byte) error {
	if c.state >= StateClosing || c.peerClosed {
		return ErrClosed
	}
	maxDatagram := c.maxDatagram
	if maxDatagram == 0 {
		maxDatagram = c.cfg.MaxDatagram
	}
	if len(msg) > maxDatagram-HeaderLen-tagLen-datagramOverhead-ackFixedLen {
		return ErrTooLarge
	}
	buf, ok := c.pool.get(len(msg))
	if !ok {
		return ErrMemory
	}
	copy(buf, msg)
	if !c.dgramOut.push(buf, c.cfg.DatagramQueue) {
		c.pool.put(buf)
		return ErrQueueFull
	}
	c.changed()
	return nil
}

// ReadMessage appends the next reliable message to dst; false when none
// is complete.
func (c *Conn) ReadMessage(dst []byte) ([]byte, bool) {
	if c.rcv.ready == 0 {
		return dst, false
	}
	before := c.rcv.advertised()
	dst = c.rcv.read(dst, c.pool)
	if before < uint16(c.rcv.window/2) && c.rcv.advertised() >= uint16(c.rcv.window/2) {
		c.windowUpdated, c.ackPending, c.ackNow = true, true, true
		c.changed()
	}
	if c.client {
		c.finishIfRead()
	}
	return dst, true
}

// ReadDatagram appends the next unreliable message to dst; false when
// none is queued.
func (c *Conn) ReadDatagram(dst []byte) ([]byte, bool) {
	if c.dgramIn.size == 0 {
		return dst, false
	}
	b := c.dgramIn.pop()
	dst = append(dst, b...)
	c.pool.put(b)
	if c.client {
		c.finishIfRead()
	}
	return dst, true
}

// finishIfRead ends a session whose peer closed it once everything that
// came before the CLOSE has been read. A client's reads call it; on the
// server the endpoint does, after OnReadable (which reads all), so the
// App never sees a message after Closed.
func (c *Conn) finishIfRead() {
	if c.peerClosed && !c.Readable() {
		c.finish(ErrPeerClosed)
	}
}

// SetValue attaches the application's state to the session (the I/O
// shell's per-session state); Value returns it.
func (c *Conn) SetValue(v any) { c.value = v }

// Value returns what SetValue attached.
func (c *Conn) Value() any { return c.value }

// SetTimer asks for the endpoint's OnTimer once d has passed (to the
// millisecond); a later call replaces an earlier one and d <= 0 cancels
// it. For the application's own deadlines (a handshake of its protocol).
// Server sessions only: on a client's Conn it does nothing.
func (c *Conn) SetTimer(d time.Duration) {
	if c.ep == nil || c.state == StateClosed {
		return
	}
	c.appTimerAt = 0
	if d > 0 {
		c.appTimerAt = c.ep.now + max(int64(d), 1)
	}
	c.changed()
}

// Readable reports whether a message or a datagram waits to be read.
func (c *Conn) Readable() bool { return c.rcv.ready > 0 || c.dgramIn.size > 0 }

// Close queues a CLOSE for the peer and ends the session once it is sent
// (AppendDatagram). Unacknowledged messages are dropped.
func (c *Conn) Close() error {
	return c.closeWith(CloseNormal, "")
}

func (c *Conn) closeWith(code uint16, reason string) error {
	if c.state >= StateClosing {
		return nil
	}
	if c.peerClosed { // the peer is gone: nothing to tell it
		c.finish(ErrPeerClosed)
		return nil
	}
	if c.state == StateHandshake {
		c.finish(ErrClosed)
		return nil
	}
	c.state, c.closeCode, c.closeReason = StateClosing, code, reason
	c.changed()
	return nil
}

// finish ends the session at once and frees its buffers.
func (c *Conn) finish(err error) {
	if c.state == StateClosed {
		return
	}
	c.state, c.err = StateClosed, err
	c.snd.clear(c.pool)
	c.rcv.clear(c.pool)
	c.dgramOut.clear(c.pool)
	c.dgramIn.clear(c.pool)
	c.snd.ring, c.rcv.ring = nil, nil
	if c.ep != nil {
		c.ep.closed(c)
	}
}

// busy records data sent or received on the session: its endpoint is
// not idle (Endpoint.Idle). A client's session has no endpoint.
func (c *Conn) busy(now int64) {
	if c.ep != nil {
		c.ep.lastBusy = now
	}
}

// changed tells the owner that the session may have something to send
// or a new deadline.
func (c *Conn) changed() {
	if c.ep != nil {
		c.ep.wake(c)
	}
}
