package rudp

import "time"

// congestion is a delay-based controller with a pacer. Random loss on a
// wireless or cellular link says nothing about queues, so loss never
// shrinks the window here; a rising RTT does (Vegas: the bytes the path
// queues are cwnd * (1 - minRTT/RTT)). The pacer spreads the window over
// the RTT, with a small burst allowance so sparse IoT messages leave at
// once.
type congestion struct {
	cwnd       int   // bytes
	ssthresh   int   // bytes; slow start below it
	mss        int   // bytes of a full datagram
	roundEnd   int64 // the round ends when a fragment sent after this is acknowledged
	tokens     int   // pacing credit, bytes
	lastRefill int64
	rounds     uint32
}

// Congestion parameters, in full datagrams.
const (
	ccInitialWindow = 32
	ccMinWindow     = 4
	ccMaxWindow     = 1 << 14
	ccAlpha         = 2 // fewer queued than this: grow
	ccBeta          = 4 // more queued than this: shrink
	ccBurst         = 10
)

func (c *congestion) init(mss int) {
	c.mss = mss
	c.cwnd = ccInitialWindow * mss
	c.ssthresh = ccMaxWindow * mss
	c.tokens = ccBurst * mss
}

// onRound runs once per round trip (the first acknowledgement of a
// fragment sent after the previous round ended) with the round's RTT.
func (c *congestion) onRound(rtt, minRTT time.Duration, now int64) {
	c.roundEnd = now
	c.rounds++
	if minRTT <= 0 || rtt <= 0 {
		return
	}
	queued := int(int64(c.cwnd) * int64(rtt-minRTT) / int64(rtt))
	switch {
	case c.cwnd < c.ssthresh && queued < c.mss:
		c.cwnd *= 2
	case queued > ccBeta*c.mss:
		c.ssthresh = c.cwnd // stop doubling once a queue has been seen
		c.cwnd -= c.cwnd / 8
	case queued < ccAlpha*c.mss:
		c.cwnd += c.mss
	}
	c.cwnd = min(max(c.cwnd, ccMinWindow*c.mss), ccMaxWindow*c.mss)
}

// refill adds pacing credit for the time since the last refill at a rate
// of 1.25 windows per smoothed RTT, up to the burst allowance.
func (c *congestion) refill(now int64, srtt time.Duration) {
	if now <= c.lastRefill {
		return
	}
	elapsed := now - c.lastRefill
	c.lastRefill = now
	if srtt <= 0 {
		srtt = time.Millisecond
	}
	add := int64(c.cwnd) * 5 / 4 * elapsed / int64(srtt)
	c.tokens = int(min(int64(c.tokens)+add, int64(max(ccBurst*c.mss, c.cwnd/4))))
}

// canSend reports whether the pacer allows size bytes now; if not, wait
// says how long until it does.
func (c *congestion) canSend(size int, srtt time.Duration) (ok bool, wait time.Duration) {
	if c.tokens >= size {
		return true, 0
	}
	if srtt <= 0 {
		srtt = time.Millisecond
	}
	rate := int64(c.cwnd) * 5 / 4 // bytes per srtt
	wait = time.Duration(int64(size-c.tokens) * int64(srtt) / max(rate, 1))
	return false, max(wait, 100*time.Microsecond)
}

// spend takes size bytes of pacing credit.
func (c *congestion) spend(size int) { c.tokens -= size }
