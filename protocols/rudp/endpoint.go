package rudp

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net/netip"
	"time"
)

// EndpointOptions are what the I/O shell gives an Endpoint besides its
// Config.
type EndpointOptions struct {
	// Worker and Workers: this endpoint is worker Worker of Workers; it
	// hands out session ids that Route maps back to it.
	Worker, Workers int
	// Secret keys the cookies; every worker of a handler shares it.
	Secret [32]byte
	// Rand supplies session ids and challenges (crypto/rand by default;
	// tests pass a seeded source).
	Rand io.Reader
	// Budget, when set, is the memory budget this endpoint shares with
	// others (a handler's workers); otherwise it has its own of
	// Config.MemoryBudget.
	Budget *Budget
	// OnSession is called for a new session, OnClosed when one ends (with
	// why), OnReadable when messages or datagrams wait. They run inside
	// Input, Tick or AppendDatagram and may use the Conn, but must not
	// call back into the Endpoint's Input, Tick or AppendDatagram.
	OnSession  func(*Conn)
	OnClosed   func(*Conn, error)
	OnReadable func(*Conn)
	// OnSent is called when an ACK leaves nothing that Send queued
	// unacknowledged (Buffered is 0); OnTimer when a session's SetTimer
	// deadline passes. Same rules as above.
	OnSent  func(*Conn)
	OnTimer func(*Conn)
}

// EndpointStats counts what an endpoint did outside its sessions.
type EndpointStats struct {
	Sessions         int    // open now
	SessionsOpened   uint64 // ever
	Retries          uint64 // cookies sent
	RetriesDropped   uint64 // a full queue or the amplification limit
	BadCookies       uint64
	UnknownSessions  uint64 // DATA for no session
	Malformed        uint64 // bad header, CRC or frames outside a session
	Refused          uint64 // plain client in sealed mode, unknown device, bad AUTH, no room
	MemoryInUse      int    // bytes of message buffers this endpoint's sessions hold
	PendingResponses int    // stateless replies waiting
}

// add sums o into s.
func (s *EndpointStats) add(o EndpointStats) {
	s.Sessions += o.Sessions
	s.SessionsOpened += o.SessionsOpened
	s.Retries += o.Retries
	s.RetriesDropped += o.RetriesDropped
	s.BadCookies += o.BadCookies
	s.UnknownSessions += o.UnknownSessions
	s.Malformed += o.Malformed
	s.Refused += o.Refused
	s.MemoryInUse += o.MemoryInUse
	s.PendingResponses += o.PendingResponses
}

// handshakeKey finds a session whose client may not have its ACCEPT yet.
type handshakeKey struct {
	addr  netip.AddrPort
	nonce uint64
}

// retryReply is a stateless reply waiting for AppendDatagram.
type retryReply struct {
	to    netip.AddrPort
	nonce uint64
	at    int64 // unix seconds, for the cookie
}

// Endpoint is the server side of one worker: its sessions, the cookie
// check in front of them, and their timers. One goroutine calls it.
type Endpoint struct {
	cfg        Config
	opts       EndpointOptions
	epoch      time.Time
	now        int64
	sessions   map[uint64]*Conn
	handshakes map[handshakeKey]*Conn
	cookies    *cookieJar
	pool       bufPool
	wheel      wheel
	ready      *Conn // sessions that may have a packet to send
	readyTail  *Conn
	replies    []retryReply // a ring of cfg.PendingRetries
	replyHead  int
	replyCount int
	scratch    []byte // opened packets
	peak       int    // most sessions since the maps were last rebuilt
	lastBusy   int64  // data sent or received, or an INITIAL taken in (Idle)
	randBuf    [8]byte
	stats      EndpointStats
}

// NewEndpoint makes worker opts.Worker's endpoint; now starts its clock.
func NewEndpoint(cfg Config, opts EndpointOptions, now time.Time) (*Endpoint, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Workers < 1 {
		opts.Workers = 1
	}
	if opts.Worker < 0 || opts.Worker >= opts.Workers {
		return nil, ErrConfig
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	e := &Endpoint{
		cfg:        cfg,
		opts:       opts,
		epoch:      now,
		sessions:   make(map[uint64]*Conn),
		handshakes: make(map[handshakeKey]*Conn),
		cookies:    newCookieJar(opts.Secret, cfg.CookieRotation, cfg.CookieLifetime),
		replies:    make([]retryReply, cfg.PendingRetries),
		scratch:    make([]byte, MaxDatagram),
	}
	e.pool.budget = opts.Budget
	if e.pool.budget == nil {
		e.pool.budget = NewBudget(cfg.MemoryBudget)
	}
	return e, nil
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() EndpointStats {
	s := e.stats
	s.Sessions = len(e.sessions)
	s.MemoryInUse = e.pool.held
	s.PendingResponses = e.replyCount
	return s
}

// Session returns the open session with id, or nil.
func (e *Endpoint) Session(id uint64) *Conn { return e.sessions[id] }

// EachSession calls fn for every open session (fn may close it).
func (e *Endpoint) EachSession(fn func(*Conn)) {
	for _, c := range e.sessions {
		fn(c)
	}
}

// Input handles one datagram from peer.
func (e *Endpoint) Input(peer netip.AddrPort, d []byte, now time.Time) {
	e.now = int64(now.Sub(e.epoch))
	h, err := ParseHeader(d)
	if err != nil {
		e.stats.Malformed++
		return
	}
	switch h.Type {
	case TypeInitial:
		e.lastBusy = e.now // a client opening a session waits on us
		e.onInitial(peer, d, h, now)
	case TypeData:
		c := e.sessions[h.SessionID]
		if c == nil {
			e.stats.UnknownSessions++
			return
		}
		c.receive(d, h, peer, e.now, e.scratch)
		if c.Readable() && e.opts.OnReadable != nil {
			e.opts.OnReadable(c)
		}
		c.finishIfRead()
	default:
		e.stats.Malformed++ // RETRY and HANDSHAKE only go to clients
	}
}

// onInitial answers a client's INITIAL: a RETRY with a cookie unless it
// echoes a valid one; then the session (found again if the client only
// missed its ACCEPT, created otherwise).
func (e *Endpoint) onInitial(peer netip.AddrPort, d []byte, h Header, now time.Time) {
	body, err := checkCRC(d)
	if err != nil || checkFrames(TypeInitial, body[HeaderLen:]) != nil {
		e.stats.Malformed++
		return
	}
	var hello helloFrame
	var auth []byte
	var f frame
	for b := body[HeaderLen:]; len(b) > 0; {
		b, _ = parseFrame(b, &f)
		switch f.typ {
		case frameHello:
			hello = f.hello
		case frameAuth:
			auth = f.bytes
		}
	}
	if (e.cfg.Keys != nil) != h.Sealed || h.Sealed && auth == nil {
		e.stats.Refused++
		return
	}
	unix := now.Unix()
	if !e.cookies.check(hello.cookie, unix, h.SessionID, peer) {
		if len(hello.cookie) != 0 {
			e.stats.BadCookies++
		}
		e.queueRetry(peer, h.SessionID, unix, len(d))
		return
	}
	key := handshakeKey{peer, h.SessionID}
	if c := e.handshakes[key]; c != nil {
		c.acceptSend = true
		e.wake(c)
		return
	}
	var psk []byte
	if h.Sealed {
		psk = e.cfg.Keys[string(hello.deviceID)]
		if psk == nil || !authOK(psk, body, auth) {
			e.stats.Refused++
			return
		}
	}
	if len(e.sessions) >= e.cfg.MaxSessions {
		e.stats.Refused++
		return
	}
	e.newSession(peer, key, &hello, psk)
}

// authOK checks an INITIAL's AUTH frame, the packet's last frame.
func authOK(psk, body, mac []byte) bool {
	want := initialAuth(psk, body[:len(body)-1-authLen])
	return len(mac) == authLen && hmac.Equal(want[:], mac)
}

// queueRetry queues a RETRY unless it would send more than three times
// what peer sent, or the queue is full.
func (e *Endpoint) queueRetry(peer netip.AddrPort, nonce uint64, unix int64, received int) {
	if retryLen > 3*received || e.replyCount == len(e.replies) {
		e.stats.RetriesDropped++
		return
	}
	e.replies[(e.replyHead+e.replyCount)%len(e.replies)] = retryReply{peer, nonce, unix}
	e.replyCount++
}

// retryLen is the size of a RETRY packet.
const retryLen = HeaderLen + 2 + cookieLen + crcLen

// newSession creates a session for a client whose cookie checked out.
func (e *Endpoint) newSession(peer netip.AddrPort, key handshakeKey, hello *helloFrame, psk []byte) {
	c := &Conn{cfg: &e.cfg, epoch: e.epoch, pool: &e.pool, ep: e, nonce: key.nonce}
	c.timer.level, c.timer.conn = -1, c
	c.id = e.newID()
	maxDatagram := min(e.cfg.MaxDatagram, max(int(hello.maxDatagram), MinDatagram))
	idle := e.cfg.IdleTimeout
	if ms := time.Duration(hello.idleMillis) * time.Millisecond; ms > 0 && ms < idle {
		idle = max(ms, time.Second)
	}
	c.init(maxDatagram, max(int(hello.window), 4), idle)
	if hello.maxMessage > 0 {
		c.maxMessage = min(c.maxMessage, int(hello.maxMessage))
	}
	if psk != nil {
		c2s, s2c := sessionKeys(psk, key.nonce, c.id)
		c.sendKey, c.recvKey = s2c, c2s
	}
	c.state = StateEstablished
	c.path.addr = peer
	c.lastHeard, c.lastSent, c.lastData, c.createdAt = e.now, e.now, e.now, e.now
	c.acceptSend = true
	c.handshake = key
	e.sessions[c.id] = c
	e.handshakes[key] = c
	e.peak = max(e.peak, len(e.sessions))
	e.stats.SessionsOpened++
	if e.opts.OnSession != nil {
		e.opts.OnSession(c)
	}
	e.wake(c)
}

// newID draws a random non-zero id, unused here, that Route maps to this
// worker.
func (e *Endpoint) newID() uint64 {
	w := uint64(e.opts.Workers)
	for {
		id := e.random64()
		id = id - id%w + uint64(e.opts.Worker)
		if id < uint64(e.opts.Worker) { // wrapped
			continue
		}
		if id != 0 && e.sessions[id] == nil {
			return id
		}
	}
}

func (e *Endpoint) random64() uint64 {
	if _, err := io.ReadFull(e.opts.Rand, e.randBuf[:]); err != nil {
		panic("rudp: random source failed: " + err.Error())
	}
	return binary.BigEndian.Uint64(e.randBuf[:])
}

// wake puts c on the ready list. Its timer is rescheduled when it leaves
// the list (AppendDatagram, which the shell calls after every Input and
// Tick): a session due now is not put back into the wheel to fire again
// on every tick until then.
func (e *Endpoint) wake(c *Conn) {
	if c.state == StateClosed {
		return
	}
	if !c.inReady {
		c.inReady = true
		c.readyNext = nil
		if e.readyTail == nil {
			e.ready = c
		} else {
			e.readyTail.readyNext = c
		}
		e.readyTail = c
	}
}

// schedule puts c's timer at its deadline if that is earlier than where
// it is (a later deadline is left: the timer fires early and reschedules).
func (e *Endpoint) schedule(c *Conn) {
	d := c.deadline(e.now)
	if d == 0 {
		e.wheel.remove(&c.timer)
		return
	}
	tick := (d + tickNanos - 1) / tickNanos
	if c.timer.level < 0 || tick < c.timer.at {
		e.wheel.schedule(&c.timer, tick)
	}
}

// closed forgets a session that ended.
func (e *Endpoint) closed(c *Conn) {
	delete(e.sessions, c.id)
	if e.handshakes[c.handshake] == c {
		delete(e.handshakes, c.handshake)
	}
	e.wheel.remove(&c.timer)
	e.shrinkMaps()
	if e.opts.OnClosed != nil {
		e.opts.OnClosed(c, c.err)
	}
}

// shrinkMaps rebuilds the session maps once they hold a quarter of their
// peak: Go maps never give memory back, and a burst of sessions that
// has gone should not cost its peak forever. Amortized O(1).
func (e *Endpoint) shrinkMaps() {
	if e.peak < 1024 || len(e.sessions) > e.peak/4 {
		return
	}
	sessions := make(map[uint64]*Conn, len(e.sessions))
	for id, c := range e.sessions {
		sessions[id] = c
	}
	handshakes := make(map[handshakeKey]*Conn, len(e.handshakes))
	for k, c := range e.handshakes {
		handshakes[k] = c
	}
	e.sessions, e.handshakes, e.peak = sessions, handshakes, len(sessions)
}

// Tick runs the timers due at now and returns when it wants the next
// Tick (the zero time when no timer is pending).
func (e *Endpoint) Tick(now time.Time) time.Time {
	e.now = int64(now.Sub(e.epoch))
	e.wheel.advance(e.now/tickNanos, e.fire)
	return e.NextDeadline()
}

// fire runs one session's due timers.
func (e *Endpoint) fire(n *timerNode) {
	c := n.conn
	c.onTimer(e.now)
	if c.state == StateClosed {
		return
	}
	// The handshake entry stays while the client's cookie could still be
	// valid: a late copy of its INITIAL must find this session, not make
	// a second one.
	if c.handshake != (handshakeKey{}) && c.confirmed && e.now-c.createdAt > int64(e.cfg.CookieLifetime) {
		if e.handshakes[c.handshake] == c {
			delete(e.handshakes, c.handshake)
		}
		c.handshake = handshakeKey{}
	}
	e.wake(c)
}

// NextDeadline is when the earliest timer is due (zero: none), to the
// millisecond; a session with something to send makes it now.
func (e *Endpoint) NextDeadline() time.Time {
	if e.ready != nil || e.replyCount > 0 {
		return e.epoch.Add(time.Duration(e.now))
	}
	if e.wheel.count == 0 {
		return time.Time{}
	}
	return e.epoch.Add(time.Duration(e.wheel.nextTick() * tickNanos))
}

// Idle reports whether the endpoint has been idle for busyFor: no session
// sent or received data (reliable or unreliable) and no client sent an
// INITIAL. What reaches an idle endpoint is keepalives, whose answers
// wait for pingAckGrain anyway, or the first packet after a quiet spell;
// the gateway then reads its sockets less often (protocols.DatagramIdler).
func (e *Endpoint) Idle(now time.Time) bool {
	return int64(now.Sub(e.epoch))-e.lastBusy >= int64(busyFor)
}

// busyFor is how long data or a handshake keeps the endpoint from Idle:
// the gap between two messages of a session that sends one every few
// hundred milliseconds must not make it idle, and one second is when a
// quiet session's rings go (ringIdle) as well.
const busyFor = ringIdle

// AppendDatagram appends the next datagram to send to b and says where
// it goes; ok is false when nothing is due now. Call it until it returns
// false after every Input and Tick. The datagram is b[len(b):] of the
// result: pass b[:0] of a buffer of MaxDatagram to reuse it.
func (e *Endpoint) AppendDatagram(b []byte, now time.Time) (out []byte, to netip.AddrPort, ok bool) {
	e.now = int64(now.Sub(e.epoch))
	if e.replyCount > 0 {
		r := e.replies[e.replyHead]
		e.replyHead = (e.replyHead + 1) % len(e.replies)
		e.replyCount--
		e.stats.Retries++
		return e.appendRetry(b, r), r.to, true
	}
	for e.ready != nil {
		c := e.ready
		to := c.path.sendAddr()
		out, ok := c.appendPacket(b, e.now)
		if ok {
			return out, to, true
		}
		e.ready = c.readyNext
		if e.ready == nil {
			e.readyTail = nil
		}
		c.inReady, c.readyNext = false, nil
		e.schedule(c)
	}
	return b, netip.AddrPort{}, false
}

// appendRetry builds a RETRY packet.
func (e *Endpoint) appendRetry(b []byte, r retryReply) []byte {
	start := len(b)
	b = AppendHeader(b, Header{Type: TypeRetry, SessionID: r.nonce})
	b = append(b, frameRetry, cookieLen)
	b = e.cookies.appendCookie(b, r.at, r.nonce, r.to)
	return appendCRC(b, start)
}

// Close ends every session at once (no CLOSE is sent) and frees them.
func (e *Endpoint) Close() {
	for _, c := range e.sessions {
		c.finish(ErrClosed)
	}
	e.ready, e.readyTail = nil, nil
}
