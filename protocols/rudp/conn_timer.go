package rudp

import "time"

// deadline is the session's next timer, 0 for none: the ACK delay, the
// loss timers, the pacer, the path challenge, the keepalive and the idle
// timeout.
func (c *Conn) deadline(now int64) int64 {
	if c.state == StateClosed {
		return 0
	}
	if c.peerClosed { // waits for its reader only
		return c.lastHeard + int64(c.idleTimeout)
	}
	d := coarse(c.lastHeard + int64(c.idleTimeout))
	earliest := func(t int64) {
		if t != 0 && t < d {
			d = t
		}
	}
	if c.state == StateClosing || c.acceptSend || c.path.respond || c.ackNow || c.pingPending || c.nudgePending || c.loss.probe {
		earliest(now)
	}
	if c.ackPending {
		earliest(c.ackDueAt())
	}
	earliest(c.loss.reorderAt)
	earliest(c.loss.ptoAt)
	earliest(c.loss.rtoAt)
	earliest(c.loss.persistAt)
	earliest(c.appTimerAt)
	if c.path.candActive {
		earliest(c.path.challengeAt)
	}
	if c.client && c.keepAlive > 0 {
		earliest(coarse(c.lastSent + int64(c.keepAlive)))
		if !c.pingOutstanding() {
			earliest(coarse(c.lastHeard + int64(c.answerAfter())))
		}
	}
	if c.pingWaitAt != 0 && c.lastHeard < c.pingSentAt {
		earliest(c.pingWaitAt)
	}
	if c.holdsRings() {
		earliest(coarse(c.lastData + int64(ringIdle) + 1)) // idleShrink lets them go
	}
	if c.hasPaced() && !c.creditBlocked() {
		c.cc.refill(now, c.rtt.srtt)
		ok, wait := c.cc.canSend(c.maxDatagram, c.rtt.srtt)
		if ok {
			earliest(now)
		} else {
			earliest(now + int64(wait))
		}
	}
	return d
}

// hasPaced reports whether data waits that only the pacer holds back.
func (c *Conn) hasPaced() bool {
	q := &c.snd
	if c.dgramOut.size > 0 {
		return true
	}
	fits := func(f *sendFrag) bool { return q.inFlight+len(f.buf) <= c.cc.cwnd }
	if q.lost > 0 {
		for s := q.una; s < q.nxt; s++ {
			if f := q.at(s); f.state == fragLost {
				return fits(f)
			}
		}
	}
	return q.nxt < q.end && q.nxt < c.peerLimit && fits(q.at(q.nxt))
}

// onTimer runs what is due at now.
func (c *Conn) onTimer(now int64) {
	if c.state == StateClosed {
		return
	}
	if now-c.lastHeard >= int64(c.idleTimeout) {
		c.finish(ErrIdle)
		return
	}
	if c.appTimerAt != 0 && now >= c.appTimerAt {
		c.appTimerAt = 0
		if c.ep != nil && c.ep.opts.OnTimer != nil {
			c.ep.opts.OnTimer(c)
			if c.state == StateClosed {
				return
			}
		}
	}
	c.onLossTimer(now)
	c.onPathTimer(now)
	if c.ackPending && now >= c.ackDueAt() {
		c.ackNow = true
	}
	switch c.keepaliveDue(now) {
	case keepaliveAsk:
		c.pingPending = true
		c.pingRetries = 0
		c.stats.ProbesSent++
	case keepaliveQuiet:
		c.nudgePending = true
		c.stats.ProbesSent++
	}
	if c.pingWaitAt != 0 && now >= c.pingWaitAt {
		c.pingWaitAt = 0
		if c.lastHeard < c.pingSentAt {
			c.pingPending = true // the keepalive went unanswered: ask again
			c.pingRetries = min(c.pingRetries+1, 16)
			c.stats.ProbesSent++
		}
	}
	c.idleShrink(now)
}

// The keepalives a client sends.
const (
	keepaliveNone  = iota
	keepaliveQuiet // a PADDING packet: refreshes the NAT mapping and the server's idle timer, asks no answer
	keepaliveAsk   // a PING: the client needs to hear the server before its idle timeout
)

// keepaliveDue says which keepalive a client sends now. It sends one when
// it has sent nothing for the keepalive interval (the NAT's mapping needs
// traffic), and it asks for an answer only once it has heard nothing for
// answerAfter: a server that has spoken recently is not made to answer,
// which halves the datagrams an idle session costs the server. A client
// whose own traffic asks for no answer (unreliable datagrams) pings by the
// same rule, unless a ping is already waiting for its answer.
//
// A keepalive due while the ask is less than half an interval away asks
// now. The last answer came a round trip after the ask it answered, so
// the ask falls due that long after the quiet keepalive of the same
// beat; sent apart, they were two datagrams a few hundred milliseconds
// apart where one does (TestKeepaliveBeat: 87 instead of 60 up in ten
// idle minutes at the defaults). Asking up to half an interval early
// only leaves more time before the idle timeout.
func (c *Conn) keepaliveDue(now int64) int {
	if !c.client || c.keepAlive <= 0 {
		return keepaliveNone
	}
	askAt := c.lastHeard + int64(c.answerAfter())
	if now >= askAt && !c.pingOutstanding() {
		return keepaliveAsk
	}
	if now-c.lastSent >= int64(c.keepAlive) {
		if askAt-now < int64(c.keepAlive)/2 && !c.pingOutstanding() {
			return keepaliveAsk
		}
		return keepaliveQuiet
	}
	return keepaliveNone
}

// answerAfter is how long a client goes without hearing its peer before
// its keepalive asks for an answer: the idle timeout less one keepalive
// interval (at least one interval, as the keepalive is at most a third
// of the idle timeout), which leaves an interval of retries before death.
func (c *Conn) answerAfter() time.Duration {
	return max(c.idleTimeout-c.keepAlive, c.keepAlive)
}

// ackDueAt is when an owed ACK must go: max_ack_delay after the packet
// that asked for it, or, for an idle session's keepalive, the next
// pingAckGrain boundary after pingAckDelay, so that the answers to many
// sessions' keepalives leave in one batch (one wakeup, one sendmmsg).
func (c *Conn) ackDueAt() int64 {
	if c.ackLazy {
		return roundUp(c.ackFirstAt+int64(pingAckDelay), int64(pingAckGrain))
	}
	return c.ackFirstAt + int64(c.cfg.MaxAckDelay)
}

// Timer granularities. Deadlines that need no precision (the idle
// timeout, a keepalive, dropping an idle session's rings) are rounded up
// to timerGrain on the endpoint's clock, so that the timers of many idle
// sessions fall on the same few ticks: the worker wakes a few times a
// second for all of them, not once per session.
const (
	timerGrain   = 250 * time.Millisecond
	pingAckDelay = 20 * time.Millisecond // well below any RTO (min_rto 200 ms)
	pingAckGrain = 16 * time.Millisecond
)

// coarse rounds a deadline up to timerGrain.
func coarse(t int64) int64 { return roundUp(t, int64(timerGrain)) }

func roundUp(t, grain int64) int64 { return (t + grain - 1) / grain * grain }

// pingOutstanding: a ping went out after the last word from the peer.
func (c *Conn) pingOutstanding() bool { return c.pingSentAt > c.lastHeard }

// pingSent arms the wait for a keepalive's answer, backed off like the
// RTO, so a lossy link gets several tries within the idle timeout.
func (c *Conn) pingSent(now int64) {
	c.pingSentAt = now
	wait := c.rto()
	for i := uint8(0); i < c.pingRetries && wait < c.cfg.MaxRTO; i++ {
		wait *= 2
	}
	c.pingWaitAt = now + int64(min(wait, c.cfg.MaxRTO))
}

// idleShrink drops the rings of a session that has been quiet for a
// keepalive period, so that idle sessions cost little memory.
func (c *Conn) idleShrink(now int64) {
	if now-c.lastData >= int64(ringIdle) {
		c.snd.shrink()
		c.rcv.shrink()
		c.dgramOut.shrink()
		c.dgramIn.shrink()
	}
}

// ringIdle is how long a session keeps its rings without data.
const ringIdle = time.Second

// holdsRings reports whether idleShrink would let go of something: an
// empty ring or queue still allocated. An idle session's timer must come
// back for it, not wait for the peer's next keepalive (the keepalive: 10 s by default).
func (c *Conn) holdsRings() bool {
	return c.snd.ring != nil && c.snd.empty() || c.rcv.ring != nil && c.rcv.base == c.rcv.top ||
		c.dgramOut.bufs != nil && c.dgramOut.size == 0 || c.dgramIn.bufs != nil && c.dgramIn.size == 0
}
