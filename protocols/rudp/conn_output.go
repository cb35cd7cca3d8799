package rudp

import "time"

// trailerLen is the integrity trailer of this session's packets.
func (c *Conn) trailerLen() int {
	if c.sendKey != nil {
		return tagLen
	}
	return crcLen
}

// appendPacket appends the session's next packet to b, if it has one to
// send now; ok is false when it has nothing (or the pacer, the windows or
// the path's amplification credit hold it back).
func (c *Conn) appendPacket(b []byte, now int64) ([]byte, bool) {
	switch {
	case c.state == StateClosed || c.state == StateHandshake || c.peerClosed:
		return b, false
	case c.acceptSend:
		return c.appendHandshake(b, now), true
	}
	c.armPersist(now) // Send may have queued data the window holds back
	if c.creditBlocked() {
		return c.appendLoneChallenge(b, now)
	}
	room := min(c.maxDatagram, c.sendCredit()) - c.trailerLen()
	start := len(b)
	b = AppendHeader(b, Header{Type: TypeData, Sealed: c.sendKey != nil, SessionID: c.id, Number: uint32(c.nextPN)})
	limit := start + room
	if c.state == StateClosing {
		b = appendClose(b, c.closeCode, c.closeReason)
		b = c.seal(b, start, now, false)
		c.finish(ErrClosed)
		return b, true
	}
	eliciting := false
	ackRoom := 0
	if c.ackPending {
		ackRoom = ackFixedLen + sackRangeLen
	}
	if c.path.respond {
		b = appendPath(b, framePathResponse, c.path.response)
		c.path.respond, eliciting = false, true
	}
	if c.pathChallengeDue(now) {
		b = appendPath(b, framePathChallenge, c.path.challenge)
		c.challengeSent(now)
		eliciting = true
	}
	var reliable, carried bool
	b, reliable, carried = c.appendPayload(b, limit-ackRoom, now)
	eliciting = eliciting || reliable
	if c.pingPending && !eliciting {
		b = append(b, framePing)
		c.pingSent(now)
		eliciting = true
	}
	c.pingPending = c.pingPending && !eliciting
	due := c.ackPending && (c.ackNow || now >= c.ackDueAt())
	if c.ackPending && (eliciting || carried || due) {
		b = c.appendAckFrame(b, limit, now)
	}
	if c.nudgePending && len(b) == start+HeaderLen {
		b = append(b, framePadding) // the quiet keepalive: any packet will do
	}
	c.nudgePending = false
	if len(b) == start+HeaderLen {
		return b[:start], false
	}
	return c.seal(b, start, now, eliciting), true
}

// appendLoneChallenge sends a due PATH_CHALLENGE alone, past the
// candidate path's spent credit: the credit is refilled only by what the
// client sends, and a client with nothing to say (its data acknowledged,
// ACKs thinned) would otherwise hear nothing until its keepalive. The
// challenge is small and sent at most maxChallenges times, so the
// amplification it allows stays bounded.
func (c *Conn) appendLoneChallenge(b []byte, now int64) ([]byte, bool) {
	if !c.pathChallengeDue(now) {
		return b, false
	}
	start := len(b)
	b = AppendHeader(b, Header{Type: TypeData, Sealed: c.sendKey != nil, SessionID: c.id, Number: uint32(c.nextPN)})
	b = appendPath(b, framePathChallenge, c.path.challenge)
	c.challengeSent(now)
	b = c.seal(b, start, now, false)
	c.path.credit = max(c.path.credit, 0)
	return b, true
}

// appendPayload adds retransmissions, then new fragments, then unreliable
// datagrams, as the pacer, the congestion window and the peer's window
// allow. reliable says it added a DATA frame (which asks for an ACK; a
// DATAGRAM does not), carried that it added anything.
func (c *Conn) appendPayload(b []byte, limit int, now int64) (out []byte, reliable, carried bool) {
	q := &c.snd
	probe := c.loss.probe
	hasData := q.lost > 0 || q.nxt < q.end && q.nxt < c.peerLimit || c.dgramOut.size > 0 || probe || c.loss.againN > 0
	if !hasData {
		return b, false, false
	}
	c.cc.refill(now, c.rtt.srtt)
	if ok, _ := c.cc.canSend(c.maxDatagram, c.rtt.srtt); !ok && !probe {
		return b, false, false
	}
	before := len(b)
	b = c.appendCopies(b, limit, now)
	for s := q.una; s < q.nxt && q.lost > 0; s++ {
		f := q.at(s)
		if f.state != fragLost {
			continue
		}
		if len(b)+dataOverhead+len(f.buf) > limit || q.inFlight+len(f.buf) > c.cc.cwnd && !probe {
			break
		}
		b = c.appendFragment(b, s, f, now)
		q.lost--
		c.stats.Retransmits++
		if len(f.buf) <= redundantMax && c.loss.againN < len(c.loss.again) {
			c.loss.again[c.loss.againN] = s
			c.loss.againN++
		}
	}
	for q.nxt < q.end && q.nxt < c.peerLimit {
		f := q.at(q.nxt)
		if len(b)+dataOverhead+len(f.buf) > limit || q.inFlight+len(f.buf) > c.cc.cwnd && !probe {
			break
		}
		b = c.appendFragment(b, q.nxt, f, now)
		q.nxt++
		probe = false
	}
	if probe && len(b) == before {
		b = c.appendProbe(b, limit, now)
	}
	c.loss.probe = false
	reliable = len(b) > before
	for c.dgramOut.size > 0 && len(b)+datagramOverhead+len(c.dgramOut.peek()) <= limit {
		buf := c.dgramOut.pop()
		b = appendDatagram(b, buf)
		c.pool.put(buf)
	}
	if len(b) > before {
		c.cc.spend(len(b) - before)
		c.lastData = now
		c.busy(now)
	}
	return b, reliable, len(b) > before
}

// redundantMax is the largest fragment whose retransmission goes out
// twice, in two packets: for small telemetry a second loss of the same
// message costs another round trip of latency, a copy costs a few bytes
// only when there is loss.
const redundantMax = 256

// appendCopies sends the second copies of the retransmissions of the
// previous packet that are still unacknowledged.
func (c *Conn) appendCopies(b []byte, limit int, now int64) []byte {
	n := 0
	for _, s := range c.loss.again[:c.loss.againN] {
		if s < c.snd.una || s >= c.snd.nxt {
			continue
		}
		f := c.snd.at(s)
		if f.state != fragInFlight {
			continue
		}
		if len(b)+dataOverhead+len(f.buf) > limit {
			c.loss.again[n] = s // the next packet, then
			n++
			continue
		}
		b = appendData(b, uint32(s), f.flags, f.buf)
		f.sentAt = now
		c.stats.Retransmits++
	}
	c.loss.againN = n
	return b
}

// appendFragment sends fragment seq (first time or again).
func (c *Conn) appendFragment(b []byte, seq uint64, f *sendFrag, now int64) []byte {
	b = appendData(b, uint32(seq), f.flags, f.buf)
	f.sentAt = now
	if f.xmits < 255 {
		f.xmits++
	}
	f.state = fragInFlight
	c.snd.inFlight += len(f.buf)
	c.snd.flying++
	return b
}

// appendProbe is the tail loss probe when there is nothing new: the
// highest fragment in flight, sent again (still in flight), or a PING.
func (c *Conn) appendProbe(b []byte, limit int, now int64) []byte {
	q := &c.snd
	for s := q.nxt; s > q.una; s-- {
		f := q.at(s - 1)
		if f.state != fragInFlight {
			continue
		}
		if len(b)+dataOverhead+len(f.buf) <= limit {
			q.inFlight -= len(f.buf)
			q.flying--
			c.stats.Retransmits++
			return c.appendFragment(b, s-1, f, now)
		}
		break
	}
	return append(b, framePing)
}

// appendAckFrame adds the ACK, with as many SACK ranges as fit.
func (c *Conn) appendAckFrame(b []byte, limit int, now int64) []byte {
	var f ackFrame
	f.cum = uint32(c.rcv.nxt)
	f.window = c.rcv.advertised()
	if c.rcv.window == 0 {
		f.window = uint16(min(c.cfg.Window, 0xffff))
	}
	delay := time.Duration(now-c.ackFirstAt) / (100 * time.Microsecond)
	f.delay = uint16(min(max(delay, 0), 0xffff))
	c.rcv.sackRanges(&f)
	f.n = max(0, min(f.n, (limit-len(b)-ackFixedLen)/sackRangeLen))
	if len(b)+ackFixedLen > limit {
		return b
	}
	c.ackPending, c.ackNow, c.ackEliciting, c.windowUpdated, c.ackLazy = false, false, 0, false, false
	return appendAck(b, &f)
}

// seal finishes a packet: trailer, counters, timers.
func (c *Conn) seal(b []byte, start int, now int64, eliciting bool) []byte {
	if c.sendKey != nil {
		b = sealPacket(b, start, c.sendKey, &c.nonceBuf, c.nextPN)
	} else {
		b = appendCRC(b, start)
	}
	c.nextPN++
	size := len(b) - start
	c.stats.PacketsSent++
	c.stats.BytesSent += uint64(size)
	if c.path.candActive {
		c.path.credit -= size
	}
	c.lastSent = now
	if eliciting {
		c.lastAckEliciting = now
		c.armLossTimers(now, false)
	}
	return b
}

// appendHandshake is the server's HANDSHAKE packet: the ACCEPT.
func (c *Conn) appendHandshake(b []byte, now int64) []byte {
	start := len(b)
	b = AppendHeader(b, Header{Type: TypeHandshake, Sealed: c.sendKey != nil, SessionID: c.id, Number: uint32(c.nextPN)})
	b = appendAccept(b, &acceptFrame{
		nonce:           c.nonce,
		maxDatagram:     uint16(c.maxDatagram),
		window:          uint16(c.cfg.Window),
		maxMessage:      uint32(c.cfg.MaxMessage),
		idleMillis:      uint32(c.idleTimeout / time.Millisecond),
		keepaliveMillis: uint32(c.keepAlive / time.Millisecond),
	})
	c.acceptSend = false
	return c.seal(b, start, now, false)
}
