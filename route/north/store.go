package north

import (
	"encoding/binary"
	"errors"
	"time"
)

// Store is a sink's bounded on-disk queue (route/spool's Queue, through a
// small adapter in the gateway). Append is called by the sink's forward
// goroutine, Peek and Ack by its drain goroutine.
type Store interface {
	Append(data []byte) (seq uint64, err error) // ErrStoreFull: at the cap with the refuse policy
	Peek(max, maxBytes int) ([]StoreRecord, error)
	Ack(seq uint64) error
	Stats() StoreStats
	Wait() <-chan struct{} // signalled when a record goes into an empty queue
	Close() error
}

// StoreRecord is one queued message.
type StoreRecord struct {
	Seq  uint64
	Time time.Time // when it was appended
	Data []byte
}

// StoreStats is what the metrics show of a store.
type StoreStats struct {
	Records, Bytes int64
	Oldest         time.Time // zero when empty
	Dropped        uint64    // records dropped at the cap (policy oldest)
}

// ErrStoreFull is an Append refused at the cap (policy refuse).
var ErrStoreFull = errors.New("north: store full")

// A record is: flags (bit 0: QoS 1, bit 1: retain), the topic's length
// (2 bytes, big-endian), the topic, the payload.
func encodeRecord(o outbound) []byte {
	b := make([]byte, 3, 3+len(o.topic)+len(o.payload))
	b[0] = o.qos & 1
	if o.retain {
		b[0] |= 2
	}
	binary.BigEndian.PutUint16(b[1:], uint16(len(o.topic)))
	b = append(b, o.topic...)
	return append(b, o.payload...)
}

var errBadRecord = errors.New("north: malformed store record")

func decodeRecord(b []byte) (outbound, error) {
	if len(b) < 3 || b[0] > 3 {
		return outbound{}, errBadRecord
	}
	n := int(binary.BigEndian.Uint16(b[1:]))
	if len(b) < 3+n || n == 0 {
		return outbound{}, errBadRecord
	}
	return outbound{qos: b[0] & 1, retain: b[0]&2 != 0, topic: string(b[3 : 3+n]), payload: b[3+n:]}, nil
}

// peekBytes bounds one Peek.
const peekBytes = 1 << 20

// drain walks the store's records oldest first while the link is up: a
// record the forward goroutine published live is confirmed (its outcome
// awaited), any other is published here. A record is acknowledged in the
// store only once the broker took it (QoS 1: its PUBACK), so a broker
// restart or a crash of the gateway sends it again rather than losing it:
// at least once. Records appended before the current connection came up,
// and not published live, are the backlog of an outage: they go at
// drain_rate, beside the live data, oldest first.
func (s *Sink) drain() {
	defer s.wg.Done()
	pace := newPacer(s.cfg.Store.DrainRate)
	for {
		if !s.up.Up() {
			select {
			case <-s.stop:
				return
			case <-s.linkUp:
			case <-time.After(time.Second): // a missed signal costs a second, never a hang
			}
			continue
		}
		recs, err := s.store.Peek(s.cfg.Inflight, peekBytes)
		if err != nil {
			s.log.Warn("north: store peek failed", "err", err)
		}
		if len(recs) == 0 {
			select {
			case <-s.stop:
				return
			case <-s.store.Wait():
			case <-s.down():
			case <-time.After(time.Second):
			}
			continue
		}
		if !s.sendBatch(recs, pace) {
			select { // failed: let the link settle before trying again
			case <-s.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// sendBatch publishes recs, then acknowledges them in order as the broker
// does; it stops at the first failure (false), leaving the rest queued.
func (s *Sink) sendBatch(recs []StoreRecord, pace *pacer) bool {
	down := s.down()
	since := time.Unix(0, s.upSince.Load())
	pend := make([]Pending, len(recs))
	backlog := make([]bool, len(recs))
	for i, r := range recs {
		if p, ok := s.takeLive(r.Seq); ok {
			pend[i] = p
			s.sentUpTo.Store(r.Seq)
			continue
		}
		out, err := decodeRecord(r.Data)
		if err != nil {
			pend[i] = settled{err}
			s.sentUpTo.Store(r.Seq)
			continue
		}
		if backlog[i] = r.Time.Before(since); backlog[i] && !pace.wait(s.stop) {
			pend = pend[:i]
			break
		}
		pend[i] = s.up.Publish(out.topic, out.payload, out.qos, out.retain)
		s.sentUpTo.Store(r.Seq) // only now: a live message may follow it onto the connection
	}
	acked := false
	var last uint64 // the newest record done, acked once for the batch (Ack is cumulative; each writes the cursor)
	defer func() {
		if acked {
			if err := s.store.Ack(last); err != nil {
				s.log.Warn("north: store ack failed", "err", err)
			}
		}
	}()
	for i, p := range pend {
		err := waitPending(p, ackTimeout, s.stop, down)
		switch {
		case errors.Is(err, errBadRecord) || errors.Is(err, ErrUnmappable):
			s.log.Warn("north: record dropped", "seq", recs[i].Seq, "err", err)
			s.c.dropped.Add(1)
		case errors.Is(err, errStopped):
			return false
		case err != nil:
			s.c.failed.Add(1)
			return false
		default:
			s.c.published.Add(1)
			if backlog[i] {
				s.c.drained.Add(1)
			}
		}
		last, acked = recs[i].Seq, true
	}
	return len(pend) == len(recs)
}

// takeLive removes and returns the live publish of record seq, if any.
// One that failed is sent again by the drainer on its next round.
func (s *Sink) takeLive(seq uint64) (Pending, bool) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	p, ok := s.live[seq]
	delete(s.live, seq)
	return p, ok
}

// pacer spaces events at a rate: a token bucket one second deep, so a
// drain starts at once and then holds the rate.
type pacer struct {
	every time.Duration
	next  time.Time
}

func newPacer(perSecond int) *pacer {
	return &pacer{every: time.Second / time.Duration(max(perSecond, 1))}
}

// wait blocks until the next event may go; false if stop came first.
func (p *pacer) wait(stop <-chan struct{}) bool {
	now := time.Now()
	if p.next.Before(now.Add(-time.Second)) {
		p.next = now.Add(-time.Second)
	}
	p.next = p.next.Add(p.every)
	if d := p.next.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-stop:
			return false
		}
	}
	return true
}
