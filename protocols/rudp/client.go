package rudp

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	"time"
)

// Client is the client side of one session: the cookie handshake, then a
// Conn. One goroutine calls it; the I/O shell feeds it the datagrams of
// its server (Input), runs its timers (Tick) and sends what
// AppendDatagram gives.
type Client struct {
	Conn
	cookie    [cookieLen]byte
	hasCookie bool
	started   int64
	initialAt int64 // next INITIAL
	sentWith  int   // INITIALs sent with the current cookie (Karn: sample only after one)
	lastInit  int64
	pending   [][]byte // messages sent before the handshake ended
	pendingN  int
	scratch   []byte
}

// NewClient starts a client session at now; its first INITIAL is due at
// once. rnd supplies the handshake nonce (crypto/rand when nil).
func NewClient(cfg Config, rnd io.Reader, now time.Time) (*Client, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	var nb [8]byte
	for binary.BigEndian.Uint64(nb[:]) == 0 {
		if _, err := io.ReadFull(rnd, nb[:]); err != nil {
			return nil, err
		}
	}
	// The scratch holds one decrypted datagram: none is larger than
	// what this side agrees to (a larger one is refused unread).
	c := &Client{scratch: make([]byte, cfg.MaxDatagram)}
	c.Conn.cfg = &cfg
	c.Conn.client = true
	c.Conn.epoch = now
	c.Conn.nonce = binary.BigEndian.Uint64(nb[:])
	c.Conn.pool = &bufPool{budget: NewBudget(cfg.MemoryBudget)}
	c.Conn.timer.level = -1
	c.rtt.init(cfg.InitialRTT)
	c.idleTimeout = cfg.IdleTimeout
	return c, nil
}

// Send queues a reliable message; before the handshake ends it waits in
// the client whole (fragmented once the path's size is agreed).
func (c *Client) Send(msg []byte) error {
	if c.state != StateHandshake {
		return c.Conn.Send(msg)
	}
	if len(msg) > c.cfg.MaxMessage {
		return ErrTooLarge
	}
	if c.pendingN+len(msg)+minCharge > c.cfg.SendQueue {
		return ErrQueueFull
	}
	c.pending = append(c.pending, append([]byte(nil), msg...))
	c.pendingN += len(msg) + minCharge
	return nil
}

// Input handles a datagram from the server.
func (c *Client) Input(d []byte, now time.Time) {
	t := c.nanos(now)
	h, err := ParseHeader(d)
	if err != nil {
		c.stats.Malformed++
		return
	}
	switch {
	case h.Type == TypeData && c.state != StateHandshake && h.SessionID == c.id:
		c.receive(d, h, c.path.addr, t, c.scratch)
	case h.Type == TypeRetry && c.state == StateHandshake && h.SessionID == c.nonce:
		c.onRetry(d, t)
	case h.Type == TypeHandshake && c.state == StateHandshake:
		c.onHandshake(d, h, t)
	}
}

// onRetry keeps the server's cookie and sends the INITIAL again with it.
func (c *Client) onRetry(d []byte, now int64) {
	body, err := checkCRC(d)
	if err != nil || checkFrames(TypeRetry, body[HeaderLen:]) != nil {
		c.stats.Malformed++
		return
	}
	var f frame
	for b := body[HeaderLen:]; len(b) > 0; {
		if b, _ = parseFrame(b, &f); f.typ == frameRetry {
			copy(c.cookie[:], f.bytes)
		}
	}
	c.hasCookie, c.initialAt, c.sentWith = true, now, 0
	c.lastHeard = now
}

// onHandshake completes the session on the server's ACCEPT.
func (c *Client) onHandshake(d []byte, h Header, now int64) {
	var recvKey, sendKey = c.recvKey, c.sendKey
	if len(c.cfg.PSK) != 0 {
		c.sendKey, c.recvKey = sessionKeys(c.cfg.PSK, c.nonce, h.SessionID)
	}
	frames, err := c.unprotect(d, h, uint64(h.Number), c.scratch)
	if err == nil {
		err = checkFrames(TypeHandshake, frames)
	}
	var a acceptFrame
	if err == nil {
		_, err = parseAccept(frames, &a)
	}
	if err != nil || a.nonce != c.nonce {
		c.sendKey, c.recvKey = sendKey, recvKey
		c.stats.Integrity++
		return
	}
	c.id = h.SessionID
	c.rx.mark(uint64(h.Number))
	idle := c.cfg.IdleTimeout
	if ms := time.Duration(a.idleMillis) * time.Millisecond; ms > 0 && ms < idle {
		idle = max(ms, time.Second)
	}
	c.init(min(c.cfg.MaxDatagram, max(int(a.maxDatagram), MinDatagram)), max(int(a.window), 4), idle)
	if ka := time.Duration(a.keepaliveMillis) * time.Millisecond; ka > 0 {
		c.keepAlive = min(c.keepAlive, ka)
	}
	if a.maxMessage > 0 {
		c.maxMessage = min(c.maxMessage, int(a.maxMessage))
	}
	if c.sentWith == 1 {
		c.rtt.sample(time.Duration(now-c.lastInit), 0, now)
	}
	c.state = StateEstablished
	c.lastHeard, c.lastSent, c.lastData = now, now, now
	c.stats.PacketsReceived++
	c.stats.BytesReceived += uint64(len(d))
	for _, m := range c.pending {
		if err := c.Conn.Send(m); err != nil {
			c.finish(err)
			return
		}
	}
	c.pending, c.pendingN = nil, 0
}

// AppendDatagram appends the next datagram for the server to b; ok is
// false when nothing is due now.
func (c *Client) AppendDatagram(b []byte, now time.Time) ([]byte, bool) {
	t := c.nanos(now)
	if c.state != StateHandshake {
		return c.appendPacket(b, t)
	}
	if t < c.initialAt {
		return b, false
	}
	c.sentWith++
	c.lastInit = t
	wait := c.rto()
	for i := 1; i < c.sentWith && wait < c.cfg.MaxRTO; i++ {
		wait *= 2
	}
	c.initialAt = t + int64(min(wait, c.cfg.MaxRTO))
	return c.appendInitial(b, t), true
}

// appendInitial builds an INITIAL, padded to the datagram size to show
// the path carries it (and to pay for the server's answer).
func (c *Client) appendInitial(b []byte, now int64) []byte {
	start := len(b)
	sealed := len(c.cfg.PSK) != 0
	b = AppendHeader(b, Header{Type: TypeInitial, Sealed: sealed, SessionID: c.nonce, Number: uint32(c.nextPN)})
	hello := helloFrame{
		maxDatagram: uint16(c.cfg.MaxDatagram),
		window:      uint16(c.cfg.Window),
		maxMessage:  uint32(c.cfg.MaxMessage),
		idleMillis:  uint32(c.cfg.IdleTimeout / time.Millisecond),
		deviceID:    []byte(c.cfg.DeviceID),
	}
	if c.hasCookie {
		hello.cookie = c.cookie[:]
	}
	b = appendHello(b, &hello)
	pad := start + c.cfg.MaxDatagram - crcLen
	if sealed {
		pad -= 1 + authLen
	}
	for len(b) < pad {
		b = append(b, framePadding)
	}
	if sealed {
		mac := initialAuth(c.cfg.PSK, b[start:])
		b = append(append(b, frameAuth), mac[:]...)
	}
	c.nextPN++
	c.stats.PacketsSent++
	c.stats.BytesSent += uint64(len(b) + crcLen - start)
	return appendCRC(b, start)
}

// Tick runs the timers due at now and returns when the next is due.
func (c *Client) Tick(now time.Time) time.Time {
	t := c.nanos(now)
	if c.state == StateHandshake {
		if t-c.started >= int64(c.cfg.HandshakeTimeout) {
			c.finish(ErrHandshake)
		}
	} else {
		c.onTimer(t)
	}
	return c.NextDeadline(now)
}

// NextDeadline is when the client next needs Tick or AppendDatagram (the
// zero time once it is closed).
func (c *Client) NextDeadline(now time.Time) time.Time {
	t := c.nanos(now)
	var d int64
	switch c.state {
	case StateClosed:
		return time.Time{}
	case StateHandshake:
		d = min(c.initialAt, c.started+int64(c.cfg.HandshakeTimeout))
	default:
		d = c.deadline(t)
	}
	return c.epoch.Add(time.Duration(d))
}

// Buffered is how many reliable bytes wait: held for the handshake, or
// queued and not yet acknowledged.
func (c *Client) Buffered() int { return c.pendingN + c.snd.bytes }
