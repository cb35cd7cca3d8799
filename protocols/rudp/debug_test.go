package rudp

import "fmt"

func (c *Conn) debugString() string {
	q := &c.snd
	return fmt.Sprintf("state=%v una=%d nxt=%d end=%d lost=%d flying=%d inflight=%d cwnd=%d peerLimit=%d ackPending=%v ackNow=%v ping=%v probe=%v tokens=%d reorderAt=%d pto=%d rto=%d rcv(base=%d nxt=%d top=%d ready=%d) cand=%v credit=%d",
		c.state, q.una, q.nxt, q.end, q.lost, q.flying, q.inFlight, c.cc.cwnd, c.peerLimit, c.ackPending, c.ackNow, c.pingPending, c.loss.probe, c.cc.tokens, c.loss.reorderAt, c.loss.ptoAt, c.loss.rtoAt, c.rcv.base, c.rcv.nxt, c.rcv.top, c.rcv.ready, c.path.candActive, c.path.credit)
}
