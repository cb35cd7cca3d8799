package rudp

import (
	"net/netip"
	"time"
)

// unprotect checks a session packet's integrity (CRC, or AEAD into
// scratch) and returns its frames.
func (c *Conn) unprotect(d []byte, h Header, pn uint64, scratch []byte) ([]byte, error) {
	if (c.recvKey != nil) != h.Sealed {
		return nil, ErrIntegrity
	}
	if c.recvKey != nil {
		return openPacket(scratch, d, c.recvKey, &c.nonceBuf, pn)
	}
	body, err := checkCRC(d)
	if err != nil {
		return nil, err
	}
	return body[HeaderLen:], nil
}

// receive handles a DATA packet of this session from addr: integrity,
// replay, frame checks, then the frames themselves. A packet that fails
// any check is dropped whole and counted, and changes nothing else.
func (c *Conn) receive(d []byte, h Header, from netip.AddrPort, now int64, scratch []byte) {
	if c.state == StateClosed {
		return
	}
	pn := expandNumber(h.Number, c.rx.expected())
	if c.rx.seen(pn) {
		c.stats.Duplicates++
		return
	}
	frames, err := c.unprotect(d, h, pn, scratch)
	if err != nil {
		c.stats.Integrity++
		return
	}
	if checkFrames(h.Type, frames) != nil {
		c.stats.Malformed++
		return
	}
	newest := !c.rx.any || pn > c.rx.largest
	c.rx.mark(pn)
	c.lastHeard = now
	c.stats.PacketsReceived++
	c.stats.BytesReceived += uint64(len(d))
	if !c.client {
		c.onPathPacket(from, len(d), newest, now)
		c.confirmed = true
	}
	c.applyFrames(frames, from, now)
}

// applyFrames acts on a checked packet's frames.
func (c *Conn) applyFrames(b []byte, from netip.AddrPort, now int64) {
	var f frame
	eliciting, urgent, pingOnly := false, false, true
	idle := now-c.lastData >= int64(ringIdle) // before a DATA frame here moves it
	for len(b) > 0 && c.state != StateClosed {
		b, _ = parseFrame(b, &f)
		if f.typ != framePing && f.typ != framePadding && f.typ != frameAck {
			pingOnly = false
		}
		switch f.typ {
		case framePing:
			eliciting = true
		case frameAck:
			c.onAck(&f.ack, now)
		case frameData:
			eliciting = true
			c.lastData = now
			c.busy(now)
			urgent = c.onData(&f.data) || urgent
		case frameDatagram:
			c.busy(now)
			c.onDatagram(f.bytes)
		case framePathChallenge:
			c.path.respond, c.path.response = true, f.value
			eliciting, urgent = true, true
		case framePathResponse:
			c.onPathResponse(from, f.value)
		case frameClose:
			// What arrived before the CLOSE is still the peer's word:
			// the session ends once it is read (finishIfRead).
			c.peerClosed = true
			if !c.Readable() {
				c.finish(ErrPeerClosed)
			}
			return
		}
	}
	if eliciting {
		// A PING on a session quiet for a while is a keepalive: its
		// answer may wait to leave with other sessions' answers. During a
		// transfer a PING is a loss probe, answered as fast as data.
		lazy := pingOnly && idle && !c.client
		if !c.ackPending {
			c.ackFirstAt, c.ackLazy = now, lazy
		} else if !lazy {
			c.ackLazy = false
		}
		c.ackPending = true
		c.ackEliciting++
		if urgent || c.ackEliciting >= 2 {
			c.ackNow = true
		}
	}
	c.changed()
}

// onData stores a fragment. It reports whether the ACK should go at once:
// out of order, a duplicate (the peer missed an ACK), or refused.
func (c *Conn) onData(f *dataFrame) bool {
	q := &c.rcv
	seq := expandNumber(f.seq, q.nxt)
	if seq < q.nxt || seq < q.top && q.ring != nil && q.at(seq).present {
		c.stats.Duplicates++
		return true
	}
	if seq >= q.limit() {
		c.stats.OutOfWindow++
		return true
	}
	buf, ok := c.pool.get(len(f.data))
	if !ok {
		return true // over budget: the peer sends it again
	}
	copy(buf, f.data)
	q.insert(seq, f.flags, buf)
	gap := seq != q.nxt
	before := q.nxt
	if !q.deliver(c.cfg.MaxMessage) {
		c.closeWith(CloseProtocol, "fragments out of message order or message too large")
		return true
	}
	return gap || q.nxt > before+1 || q.top > q.nxt
}

// onDatagram queues an unreliable message for ReadDatagram.
func (c *Conn) onDatagram(b []byte) {
	buf, ok := c.pool.get(len(b))
	if !ok {
		c.stats.DatagramsDropped++
		return
	}
	copy(buf, b)
	if !c.dgramIn.push(buf, c.cfg.DatagramQueue) {
		c.pool.put(buf)
		c.stats.DatagramsDropped++
	}
}

// onAck applies an ACK frame. An ACK for a fragment never sent is
// rejected whole (counted; nothing changes): the peer is broken or the
// ACK is forged. An ACK older than the cumulative point is stale
// (reordered) and ignored.
func (c *Conn) onAck(f *ackFrame, now int64) {
	q := &c.snd
	if int32(f.cum-uint32(q.una)) < 0 {
		return
	}
	cum := q.una + uint64(f.cum-uint32(q.una))
	if cum > q.nxt {
		c.stats.AcksRejected++
		return
	}
	for _, r := range f.ranges[:f.n] {
		if cum+uint64(r.end-f.cum) > q.nxt {
			c.stats.AcksRejected++
			return
		}
	}
	c.peerLimit = max(c.peerLimit, cum+uint64(f.window))
	var sampleAt int64 = -1
	ackIt := func(s uint64) {
		fr := q.at(s)
		if fr.state == fragAcked {
			return
		}
		if fr.state == fragInFlight {
			q.inFlight -= len(fr.buf)
			q.flying--
		} else if fr.state == fragLost {
			q.lost--
		}
		c.onDelivered(s, fr, now)
		if fr.xmits == 1 && fr.sentAt > sampleAt {
			sampleAt = fr.sentAt
		}
		q.release(fr, c.pool)
	}
	for s := q.una; s < cum; s++ {
		ackIt(s)
	}
	for _, r := range f.ranges[:f.n] {
		start := cum + uint64(r.start-f.cum)
		for s := start; s < start+uint64(r.end-r.start); s++ {
			ackIt(s)
		}
	}
	newAck := cum > q.una || sampleAt >= 0
	q.advance()
	if sampleAt >= 0 {
		rtt := time.Duration(now - sampleAt)
		c.rtt.sample(rtt, time.Duration(f.delay)*100*time.Microsecond, now)
		if sampleAt >= c.cc.roundEnd {
			c.cc.onRound(c.rtt.latest, c.rtt.minRTT, now)
		}
	}
	if newAck {
		c.rtt.backoff = 0
		c.loss.tlpFired = false
		c.notePeerAckDelay(f.delay)
	}
	c.detectLosses(now)
	c.armLossTimers(now, newAck)
	if newAck && q.empty() && c.ep != nil && c.ep.opts.OnSent != nil {
		c.ep.opts.OnSent(c)
	}
}
