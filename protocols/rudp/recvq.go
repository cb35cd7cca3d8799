package rudp

// recvFrag is one received fragment waiting for delivery or for the
// application to read its message.
type recvFrag struct {
	buf     []byte
	flags   uint8
	present bool
}

// recvQueue reassembles fragments [base, base+window): below nxt they are
// contiguous (nxt is the cumulative acknowledgement), above it they are
// whatever arrived. Messages between base and nxt are complete and wait
// for ReadMessage.
type recvQueue struct {
	ring      []recvFrag // len: the window rounded up to a power of two
	window    uint64
	base      uint64 // first fragment of the oldest unread message
	nxt       uint64 // first missing fragment
	top       uint64 // one past the highest fragment received
	ready     int    // complete messages in [base, nxt)
	inMessage bool   // the fragment at nxt-1 was not a message's last
	msgBytes  int    // bytes of the message being assembled at nxt
	bytes     int    // buffered payload
}

func (q *recvQueue) at(seq uint64) *recvFrag {
	return &q.ring[seq&uint64(len(q.ring)-1)]
}

// limit is one past the highest fragment the window admits.
func (q *recvQueue) limit() uint64 { return q.base + q.window }

// advertised is the window the ACK frame announces: fragments from nxt on.
func (q *recvQueue) advertised() uint16 {
	return uint16(min(q.limit()-q.nxt, 0xffff))
}

// ensureRing allocates the ring on first use (an idle session has none).
func (q *recvQueue) ensureRing() {
	if q.ring == nil {
		n := 8
		for uint64(n) < q.window {
			n *= 2
		}
		q.ring = make([]recvFrag, n)
	}
}

// Outcomes of recvQueue.insert.
const (
	recvNew = iota
	recvDuplicate
	recvOutOfWindow
)

// insert stores a fragment (buf already copied from the packet); the
// caller frees buf unless the outcome is recvNew.
func (q *recvQueue) insert(seq uint64, flags uint8, buf []byte) int {
	if seq < q.nxt {
		return recvDuplicate
	}
	if seq >= q.limit() {
		return recvOutOfWindow
	}
	q.ensureRing()
	f := q.at(seq)
	if f.present {
		return recvDuplicate
	}
	*f = recvFrag{buf: buf, flags: flags, present: true}
	q.bytes += len(buf)
	q.top = max(q.top, seq+1)
	return recvNew
}

// deliver moves nxt over contiguous fragments, checking message framing
// and size. It returns false when the peer broke them.
func (q *recvQueue) deliver(maxMessage int) bool {
	for q.nxt < q.top {
		f := q.at(q.nxt)
		if !f.present {
			break
		}
		first, last := f.flags&fragFirst != 0, f.flags&fragLast != 0
		if first == q.inMessage {
			return false // a message starts inside another, or a middle without a start
		}
		if first {
			q.msgBytes = 0
		}
		q.msgBytes += len(f.buf)
		if q.msgBytes > maxMessage {
			return false
		}
		q.inMessage = !last
		if last {
			q.ready++
		}
		q.nxt++
	}
	return true
}

// read appends the oldest complete message to dst and frees its fragments.
func (q *recvQueue) read(dst []byte, pool *bufPool) []byte {
	for {
		f := q.at(q.base)
		dst = append(dst, f.buf...)
		last := f.flags&fragLast != 0
		q.bytes -= len(f.buf)
		pool.put(f.buf)
		*f = recvFrag{}
		q.base++
		if last {
			q.ready--
			return dst
		}
	}
}

// sackRanges fills f's ranges with what is present above nxt, lowest
// first, at most MaxSACKRanges.
func (q *recvQueue) sackRanges(f *ackFrame) {
	f.n = 0
	if q.ring == nil {
		return
	}
	for s := q.nxt + 1; s < q.top && f.n < MaxSACKRanges; s++ {
		if !q.at(s).present {
			continue
		}
		start := s
		for s < q.top && q.at(s).present {
			s++
		}
		f.ranges[f.n] = sackRange{uint32(start), uint32(s)}
		f.n++
	}
}

// shrink drops the ring of an idle session.
func (q *recvQueue) shrink() {
	if q.base == q.top {
		q.ring = nil
	}
}

// clear frees every buffer.
func (q *recvQueue) clear(pool *bufPool) {
	for i := range q.ring {
		pool.put(q.ring[i].buf)
		q.ring[i] = recvFrag{}
	}
	q.ready, q.bytes = 0, 0
	q.base, q.nxt = q.top, q.top
}
