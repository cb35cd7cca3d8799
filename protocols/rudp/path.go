package rudp

import (
	"net/netip"
	"time"
)

// pathState is where a server session sends. A packet of the session
// from a new address (a NAT rebinding) that is the newest the session has
// seen moves sending there at once, but the new address is not trusted
// until it echoes a PATH_CHALLENGE: until then the session sends it at
// most three times the bytes it received from it, so a forged source
// cannot turn the session into an amplifier. A session never sends to
// more than the validated address and one candidate.
type pathState struct {
	addr        netip.AddrPort // validated
	cand        netip.AddrPort
	candActive  bool
	credit      int // bytes the candidate may still be sent
	challenge   uint64
	challengeAt int64 // next (re)transmission of the challenge; 0: sent, waiting
	tries       int
	respond     bool // a PATH_RESPONSE is owed
	response    uint64
}

// maxChallenges is how many times a challenge is sent before the
// candidate is given up (the session falls back to the validated address).
const maxChallenges = 5

// sendAddr is where the next packet goes.
func (p *pathState) sendAddr() netip.AddrPort {
	if p.candActive {
		return p.cand
	}
	return p.addr
}

// onPacket accounts an authentic packet of size bytes from addr; newest
// says it carries the highest packet number so far.
func (c *Conn) onPathPacket(from netip.AddrPort, size int, newest bool, now int64) {
	p := &c.path
	switch {
	case from == p.addr:
		if newest && p.candActive {
			p.candActive = false // the old path is in use again
		}
	case p.candActive && from == p.cand:
		p.credit += 3 * size
	case newest:
		*p = pathState{addr: p.addr, respond: p.respond, response: p.response,
			cand: from, candActive: true, credit: 3 * size, challenge: c.randomValue(), challengeAt: now}
		c.stats.PathChallenges++
	}
}

// onPathResponse validates the candidate when it echoes the challenge
// from the candidate's own address.
func (c *Conn) onPathResponse(from netip.AddrPort, value uint64) {
	p := &c.path
	if p.candActive && from == p.cand && value == p.challenge {
		p.addr, p.candActive = p.cand, false
		c.stats.Migrations++
	}
}

// pathChallengeDue reports whether a challenge goes into the next packet.
func (c *Conn) pathChallengeDue(now int64) bool {
	p := &c.path
	return p.candActive && p.challengeAt != 0 && p.challengeAt <= now
}

// challengeSent schedules the next retransmission, or gives the
// candidate up after maxChallenges. The interval is the RTO without the
// data's backoff: that backoff counts timeouts of data sent where the
// client no longer was (the rebinding itself), and at its two-second cap
// five challenges took ten seconds while the data waited for the path.
func (c *Conn) challengeSent(now int64) {
	p := &c.path
	p.tries++
	p.challengeAt = now + int64(max(c.rtt.baseRTO(c.cfg.MinRTO, c.cfg.MaxRTO), 50*time.Millisecond))
}

// onPathTimer gives up a candidate that did not answer.
func (c *Conn) onPathTimer(now int64) {
	p := &c.path
	if p.candActive && p.tries >= maxChallenges && p.challengeAt <= now {
		p.candActive = false
	}
}

// sendCredit is the most the next packet may carry: unlimited toward the
// validated address, the remaining credit toward a candidate.
func (c *Conn) sendCredit() int {
	if c.path.candActive {
		return c.path.credit
	}
	return 1 << 30
}

// creditBlocked: the candidate path's credit is too small for a packet;
// only bytes from it (or its validation) unblock the session.
func (c *Conn) creditBlocked() bool {
	return c.path.candActive && c.path.credit-c.trailerLen() < HeaderLen+ackFixedLen+pathFrameLen
}

// randomValue draws 64 random bits from the owner's source.
func (c *Conn) randomValue() uint64 {
	if c.ep != nil {
		return c.ep.random64()
	}
	return 0
}
