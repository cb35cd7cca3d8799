package rudp

import "time"

// lossState is RACK-TLP (RFC 8985) plus the RTO of RFC 6298. RACK deems
// a fragment lost when one sent after it has been delivered and a
// reordering window has passed: time, not a count of duplicate ACKs, so
// a lone lost message among sparse IoT traffic is found by the next one,
// and a tail loss by the probe timeout, without waiting for an RTO.
type lossState struct {
	rackXmit  int64 // send time of the most recently sent delivered fragment
	rackSeq   uint64
	rackRTT   time.Duration
	rackValid bool
	reoMult   int // reordering window in quarters of the minimum RTT
	calmRound uint32

	reorderAt int64 // RACK's reordering timer
	ptoAt     int64 // tail loss probe
	rtoAt     int64
	tlpFired  bool // a probe is out since the last new acknowledgement
	probe     bool // the next packet is a probe: it may pass the window
	persistAt int64
	persistN  uint8
	again     [8]uint64 // small retransmissions to send once more, in the next packet
	againN    int

	// peerAckDelay is the longest the peer has held an ACK of new data
	// (the ACK frames' delay field), at least minPeerAckDelay and this
	// side's own: the probe timer waits for it. Learned, not negotiated,
	// so it works with peers of any max_ack_delay (one that holds ACKs
	// longer than minPeerAckDelay may get a needless probe before its
	// delay is known).
	peerAckDelay time.Duration
}

// maxPeerAckDelay bounds what a peer's ACK delays can add to the probe
// timeout: a peer that holds ACKs longer gets probes it did not need.
const maxPeerAckDelay = 200 * time.Millisecond

// minPeerAckDelay is what the probe timer assumes a peer may hold an ACK
// before it has seen the peer's delay: the thinned-ACK setting's 25 ms,
// so a peer that thins its ACKs gets no needless first probe.
const minPeerAckDelay = 25 * time.Millisecond

// notePeerAckDelay learns from an ACK that acknowledged new data.
func (c *Conn) notePeerAckDelay(delay uint16) {
	d := time.Duration(delay) * 100 * time.Microsecond
	c.loss.peerAckDelay = max(c.loss.peerAckDelay, min(d, maxPeerAckDelay))
}

// onDelivered updates RACK with a fragment the peer has acknowledged.
// A retransmitted fragment acknowledged sooner than the minimum RTT after
// its last transmission was delivered by an earlier copy: it does not
// move RACK, and it tells that the reordering window was too small.
func (c *Conn) onDelivered(seq uint64, f *sendFrag, now int64) {
	elapsed := time.Duration(now - f.sentAt)
	if f.xmits > 1 && elapsed < c.rtt.minRTT {
		c.loss.reoMult = min(c.loss.reoMult+1, 8)
		c.loss.calmRound = c.cc.rounds
		return
	}
	if !c.loss.rackValid || f.sentAt > c.loss.rackXmit || f.sentAt == c.loss.rackXmit && seq > c.loss.rackSeq {
		c.loss.rackXmit, c.loss.rackSeq, c.loss.rackRTT, c.loss.rackValid = f.sentAt, seq, elapsed, true
	}
}

// reorderWindow is RACK's allowance for reordering: a quarter of the
// minimum RTT, widened after spurious retransmissions and narrowed again
// after 16 calm rounds, never above SRTT.
func (c *Conn) reorderWindow() time.Duration {
	if c.loss.reoMult == 0 {
		c.loss.reoMult = 1
	}
	if c.loss.reoMult > 1 && c.cc.rounds-c.loss.calmRound >= 16 {
		c.loss.reoMult--
		c.loss.calmRound = c.cc.rounds
	}
	return min(c.rtt.minRTT/4*time.Duration(c.loss.reoMult), c.rtt.srtt)
}

// detectLosses marks as lost every fragment in flight that was sent
// before RACK's reference and has waited RACK.rtt plus the reordering
// window, and arms the reordering timer for the others.
func (c *Conn) detectLosses(now int64) {
	c.loss.reorderAt = 0
	if !c.loss.rackValid {
		return
	}
	wait := int64(c.loss.rackRTT + c.reorderWindow())
	for s := c.snd.una; s < c.snd.nxt; s++ {
		f := c.snd.at(s)
		if f.state != fragInFlight {
			continue
		}
		if f.sentAt > c.loss.rackXmit || f.sentAt == c.loss.rackXmit && s >= c.loss.rackSeq {
			continue
		}
		if at := f.sentAt + wait; at > now {
			if c.loss.reorderAt == 0 || at < c.loss.reorderAt {
				c.loss.reorderAt = at
			}
			continue
		}
		c.markLost(f)
	}
}

func (c *Conn) markLost(f *sendFrag) {
	f.state = fragLost
	c.snd.inFlight -= len(f.buf)
	c.snd.flying--
	c.snd.lost++
}

// pto is the tail loss probe timeout: two SRTTs plus the peer's ack delay.
func (c *Conn) pto() time.Duration {
	return max(2*c.rtt.srtt+max(c.loss.peerAckDelay, c.cfg.MaxAckDelay, minPeerAckDelay), 10*time.Millisecond)
}

func (c *Conn) rto() time.Duration { return c.rtt.rto(c.cfg.MinRTO, c.cfg.MaxRTO) }

// armLossTimers sets the probe and retransmission timers after a send or
// an acknowledgement: the RTO runs while anything is in flight, the TLP
// once per episode, and a persist probe when only the peer's window holds
// data back.
func (c *Conn) armLossTimers(now int64, newAck bool) {
	if c.snd.flying == 0 {
		c.loss.ptoAt, c.loss.rtoAt = 0, 0
	} else {
		if c.loss.rtoAt == 0 || newAck {
			c.loss.rtoAt = now + int64(c.rto())
		}
		if !c.loss.tlpFired && c.loss.reorderAt == 0 {
			c.loss.ptoAt = c.lastAckEliciting + int64(c.pto())
		} else {
			c.loss.ptoAt = 0
		}
	}
	c.armPersist(now)
}

// armPersist starts the persist timer when only the peer's window holds
// data back and nothing is in flight (no ACK will come to open it), and
// stops it otherwise. The window can close on the sender in two ways: an
// ACK acknowledges the last fragment in flight at the window's edge, or
// Send queues a message when everything sent so far, up to the edge, is
// already acknowledged. The second comes with no ACK, so appendPacket
// arms the timer too: without it, a lost window update left the sender
// waiting for a word its peer had no reason to send.
func (c *Conn) armPersist(now int64) {
	q := &c.snd
	blocked := q.flying == 0 && q.lost == 0 && q.nxt < q.end && q.nxt >= c.peerLimit
	switch {
	case !blocked:
		c.loss.persistAt, c.loss.persistN = 0, 0
	case c.loss.persistAt == 0:
		c.loss.persistAt = now + int64(c.rto())
	}
}

// onLossTimer runs whichever loss timer is due.
func (c *Conn) onLossTimer(now int64) {
	if c.loss.reorderAt != 0 && c.loss.reorderAt <= now {
		c.detectLosses(now)
	}
	switch {
	case c.loss.rtoAt != 0 && c.loss.rtoAt <= now:
		c.onRTO(now)
	case c.loss.ptoAt != 0 && c.loss.ptoAt <= now:
		c.loss.ptoAt, c.loss.tlpFired, c.loss.probe = 0, true, true
		c.stats.ProbesSent++
	case c.loss.persistAt != 0 && c.loss.persistAt <= now:
		c.pingPending = true
		c.loss.persistN = min(c.loss.persistN+1, 16)
		backoff := c.rto() << c.loss.persistN
		c.loss.persistAt = now + int64(min(backoff, c.cfg.MaxRTO))
		c.stats.ProbesSent++
	}
}

// onRTO deems everything in flight lost and backs the timer off.
func (c *Conn) onRTO(now int64) {
	c.stats.RTOs++
	if c.rtt.backoff < 16 {
		c.rtt.backoff++
	}
	for s := c.snd.una; s < c.snd.nxt; s++ {
		if f := c.snd.at(s); f.state == fragInFlight {
			c.markLost(f)
		}
	}
	c.loss.rtoAt, c.loss.ptoAt, c.loss.reorderAt = 0, 0, 0
	c.loss.tlpFired = true
}
