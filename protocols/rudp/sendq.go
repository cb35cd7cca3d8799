package rudp

// Fragment states on the send side.
const (
	fragQueued   = iota // never sent
	fragInFlight        // sent, not acknowledged, not deemed lost
	fragLost            // deemed lost, waiting for retransmission
	fragAcked           // acknowledged by a SACK range, above the cumulative point
)

// sendFrag is one fragment of a reliable message, from Send until the
// peer acknowledges it.
type sendFrag struct {
	buf    []byte // payload, from the pool
	sentAt int64  // the latest transmission
	xmits  uint8  // transmissions so far
	flags  uint8  // fragFirst | fragLast
	state  uint8
}

// sendQueue holds fragments [una, end): those below nxt have been sent at
// least once. It is a ring indexed by sequence number, grown by doubling.
type sendQueue struct {
	ring     []sendFrag
	una      uint64 // oldest fragment not cumulatively acknowledged
	nxt      uint64 // next fragment to send for the first time
	end      uint64 // one past the last queued fragment
	bytes    int    // queued payload, charged at least minCharge per fragment
	inFlight int    // payload bytes in flight, for the congestion window
	flying   int    // fragments in flight
	lost     int    // fragments in state fragLost
}

// minCharge is what a fragment counts against the send queue's bound at
// least, so a flood of empty messages is bounded too.
const minCharge = 64

func charge(n int) int { return max(n, minCharge) }

func (q *sendQueue) at(seq uint64) *sendFrag {
	return &q.ring[seq&uint64(len(q.ring)-1)]
}

// push appends a fragment, growing the ring as needed.
func (q *sendQueue) push(buf []byte, flags uint8) {
	if q.end-q.una >= uint64(len(q.ring)) {
		q.grow()
	}
	*q.at(q.end) = sendFrag{buf: buf, flags: flags}
	q.end++
	q.bytes += charge(len(buf))
}

func (q *sendQueue) grow() {
	n := max(2*len(q.ring), 8)
	ring := make([]sendFrag, n)
	for s := q.una; s < q.end; s++ {
		ring[s&uint64(n-1)] = *q.at(s)
	}
	q.ring = ring
}

// release frees a fragment's buffer once it is acknowledged.
func (q *sendQueue) release(f *sendFrag, pool *bufPool) {
	q.bytes -= charge(len(f.buf))
	pool.put(f.buf)
	f.buf = nil
	f.state = fragAcked
}

// advance moves una past acknowledged fragments.
func (q *sendQueue) advance() {
	for q.una < q.nxt && q.at(q.una).state == fragAcked {
		*q.at(q.una) = sendFrag{}
		q.una++
	}
}

// empty reports whether nothing is queued or unacknowledged.
func (q *sendQueue) empty() bool { return q.una == q.end }

// shrink drops the ring of an idle session, so an idle session costs no
// ring at all.
func (q *sendQueue) shrink() {
	if q.empty() {
		q.ring = nil
	}
}

// clear frees every buffer (the session is gone).
func (q *sendQueue) clear(pool *bufPool) {
	for s := q.una; s < q.end; s++ {
		if f := q.at(s); f.buf != nil {
			pool.put(f.buf)
		}
	}
	*q = sendQueue{una: q.end, nxt: q.end, end: q.end}
}
