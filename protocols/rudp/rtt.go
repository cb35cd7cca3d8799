package rudp

import "time"

// rttState estimates the round-trip time per RFC 6298 and keeps the
// minimum RACK-TLP needs. Callers apply Karn's rule: they feed only
// samples of fragments sent once, whose acknowledgement is unambiguous.
type rttState struct {
	srtt, rttvar, latest time.Duration
	minRTT               time.Duration // over the current and previous window
	minWindow            [2]time.Duration
	windowStart          int64
	sampled              bool
	backoff              uint8 // RTO doublings since the last new acknowledgement
}

// minRTTWindow is how long a minimum RTT sample stays valid: the path may
// change (a NAT rebinding, a new route), so old minima expire.
const minRTTWindow = int64(30 * time.Second)

// init sets the pre-sample estimate: SRTT = initial, RTTVAR = initial/2.
func (r *rttState) init(initial time.Duration) {
	r.srtt, r.rttvar = initial, initial/2
}

// sample feeds one RTT measurement taken at now, less the peer's ack
// delay when that leaves at least the minimum (RFC 9002 section 5.3).
func (r *rttState) sample(rtt, ackDelay time.Duration, now int64) {
	if rtt <= 0 {
		rtt = time.Microsecond
	}
	r.latest = rtt
	r.updateMin(rtt, now)
	if rtt-ackDelay >= r.minRTT {
		rtt -= ackDelay
	}
	if !r.sampled {
		r.sampled = true
		r.srtt, r.rttvar = rtt, rtt/2
		return
	}
	diff := r.srtt - rtt
	if diff < 0 {
		diff = -diff
	}
	r.rttvar = (3*r.rttvar + diff) / 4
	r.srtt = (7*r.srtt + rtt) / 8
}

// updateMin keeps the minimum over two windows of minRTTWindow each.
func (r *rttState) updateMin(rtt time.Duration, now int64) {
	if now-r.windowStart >= minRTTWindow {
		r.windowStart = now
		r.minWindow[1], r.minWindow[0] = r.minWindow[0], 0
	}
	if r.minWindow[0] == 0 || rtt < r.minWindow[0] {
		r.minWindow[0] = rtt
	}
	r.minRTT = r.minWindow[0]
	if r.minWindow[1] != 0 && r.minWindow[1] < r.minRTT {
		r.minRTT = r.minWindow[1]
	}
}

// rto is the retransmission timeout with the current backoff, clamped to
// [minRTO, maxRTO] (the cap applies to the backoff too).
func (r *rttState) rto(minRTO, maxRTO time.Duration) time.Duration {
	base := r.baseRTO(minRTO, maxRTO)
	for i := uint8(0); i < r.backoff && base < maxRTO; i++ {
		base *= 2
	}
	return min(base, maxRTO)
}

// baseRTO is the retransmission timeout without backoff.
func (r *rttState) baseRTO(minRTO, maxRTO time.Duration) time.Duration {
	return min(max(r.srtt+max(4*r.rttvar, time.Millisecond), minRTO), maxRTO)
}

// smoothed is SRTT, or the initial estimate before any sample.
func (r *rttState) smoothed() time.Duration { return r.srtt }
