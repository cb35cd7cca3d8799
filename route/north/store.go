package north

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/edgemux/edgemux/route/spool"
)

// Store is a sink's bounded on-disk queue (route/spool's Queue, through a
// small adapter in the gateway). Append is called by the sink's forward
// goroutine, Peek and Ack by its drain goroutine.
type Store interface {
	Append(data []byte) (seq uint64, err error) // ErrStoreFull: at the cap with the refuse policy
	// AppendBatch appends batch in order, in one write where it can: n
	// records went, with seqs first..first+n-1; on an error (ErrStoreFull
	// or another) batch[n] is the one it was about, and the rest were not
	// tried.
	AppendBatch(batch [][]byte) (first uint64, n int, err error)
	Peek(max, maxBytes int) ([]StoreRecord, error)
	// PeekAfter is Peek of the records after seq after (the last one the
	// drainer sent), so that the records in flight are not read again.
	PeekAfter(after uint64, max, maxBytes int) ([]StoreRecord, error)
	Ack(seq uint64) error
	Stats() StoreStats
	Wait() <-chan struct{} // signalled when a record goes into an empty queue
	Close() error
}

// StoreRecord is one queued message: its seq, when it was appended, its
// data.
type StoreRecord = spool.Record

// StoreStats is what the metrics show of a store.
type StoreStats struct {
	Records, Bytes int64
	Oldest         time.Time // zero when empty
	OldestSeq      uint64    // the oldest record's seq; 0 when empty
	Dropped        uint64    // records dropped at the cap (policy oldest)
}

// ErrStoreFull is an Append refused at the cap (policy refuse).
var ErrStoreFull = errors.New("north: store full")

// A record is: flags (bit 0: QoS 1, bit 1: retain), the topic's length
// (2 bytes, big-endian), the topic, the payload.
// appendRecord appends o's record to b.
func appendRecord(b []byte, o outbound) []byte {
	flags := o.qos & 1
	if o.retain {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint16(b, uint16(len(o.topic)))
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
		d := drainer{s: s, pace: pace, down: s.down(), since: time.Unix(0, s.upSince.Load())}
		if !d.run() {
			select { // failed: let the link settle before trying again
			case <-s.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// drainer is one connection's drain: a sliding window of up to inflight
// slots in flight (MQTT: paho tokens; core NATS: flushes; JetStream:
// PubAcks). The store is acked in order as the oldest slot is confirmed,
// in runs (each Ack takes the queue's lock), never past a slot not yet
// confirmed.
type drainer struct {
	s       *Sink
	pace    *pacer
	down    <-chan struct{}
	since   time.Time     // the connection's start: records older are backlog
	win     window        // sent, awaiting the broker
	queued  []StoreRecord // queued[sent:] are peeked (or live), not yet sent
	live    []Pending     // queued's live publishes (nil: not published live)
	sent    int
	next    uint64 // the first seq not yet sent (0: none sent)
	flying  int    // records in the window
	acked   uint64 // the newest seq confirmed and not yet acked in the store (0: none)
	unacked int    // records confirmed since the last Ack
}

// run drains until the link goes down, the sink stops or a publish fails
// (false; what is not acked stays queued and goes again).
func (d *drainer) run() bool {
	s := d.s
	defer d.ack()
	for {
		for d.win.done() {
			if !d.confirm() {
				return false
			}
		}
		if d.sent == len(d.queued) {
			d.refill()
		}
		// A live record is on the wire already: taking it into the
		// window only waits for its outcome, so no bound holds it back.
		if d.sent < len(d.queued) && (d.live[d.sent] != nil || d.win.len() < s.cfg.Inflight) {
			if !d.send() {
				return false
			}
			continue
		}
		if !d.idle() {
			return false
		}
	}
}

// minFlying is the fewest records the drainer keeps in flight when its
// slots allow: core NATS puts every record written before one flush in
// one slot, so inflight (which bounds slots) would let a few hundred
// records through per flush round trip; a window of 4,096 records keeps
// the connection busy while a flush is out.
const minFlying = 4096

// maxFlying bounds the records in flight (and peeked, not yet sent):
// inflight, or minFlying if that is more. Where each record is a slot of
// its own (MQTT, JetStream), the window's bound on slots comes first.
func (d *drainer) maxFlying() int { return max(d.s.cfg.Inflight, d.s.fly) }

// refill acks what is confirmed, then queues the records past the last
// one sent: the live records that follow it, all of them, taken from
// memory (they were published as they came; the store acks them by
// walking their headers); else, once half of maxFlying or less is in
// flight, up to half of maxFlying records peeked from the store (it goes
// on from where the last peek stopped, so each is read once; peekBytes
// bounds the read). A refill is a batch, not one read per record
// confirmed; the records queued go one by one as the window has room, so
// the drainer's own publishes in flight and queued stay under one and a
// half maxFlying.
func (d *drainer) refill() {
	d.ack()
	d.sent, d.queued, d.live = 0, d.queued[:0], d.live[:0]
	next := d.next
	if next == 0 { // nothing sent on this connection: from the oldest
		if next = d.s.store.Stats().OldestSeq; next == 0 {
			// The store is empty. A peek now would only race the
			// forward goroutine's next batch and read back from disk
			// what it publishes live; its append wakes idle instead.
			return
		}
	}
	var stored bool
	d.queued, d.live, stored = d.s.takeLiveRun(next, d.s.liveCap, d.queued, d.live)
	if len(d.queued) > 0 || d.flying > d.maxFlying()/2 || !stored {
		return
	}
	var recs []StoreRecord
	var err error
	if d.next == 0 {
		recs, err = d.s.store.Peek(d.maxFlying()/2, peekBytes)
	} else {
		recs, err = d.s.store.PeekAfter(d.next-1, d.maxFlying()/2, peekBytes)
	}
	if err != nil {
		d.s.log.Warn("north: store peek failed", "err", err)
	}
	d.queued = append(d.queued, recs...)
	d.live = d.s.takeLive(recs, d.live)
}

// send puts the oldest queued record in flight: its live publish if the
// forward goroutine made one, else a publish of its own (paced when it is
// backlog). False when the sink stopped while pacing.
func (d *drainer) send() bool {
	s, r, live := d.s, d.queued[d.sent], d.live[d.sent]
	if live != nil {
		d.win.add(live, r.Seq, false)
	} else if out, err := decodeRecord(r.Data); err != nil {
		d.win.add(settled{err}, r.Seq, false)
	} else {
		backlog := r.Time.Before(d.since)
		if backlog && !d.pace.wait(s.stop) {
			return false
		}
		d.win.add(s.up.Publish(out.topic, out.payload, out.qos, out.retain), r.Seq, backlog)
	}
	s.sentUpTo.Store(r.Seq) // only now: a live message may follow it onto the connection
	d.queued[d.sent], d.live[d.sent] = StoreRecord{}, nil
	d.sent++
	d.next = r.Seq + 1
	d.flying++
	return true
}

// confirm counts the oldest slot's outcome (it has settled) and marks its
// records for the store's ack; false at a failure.
func (d *drainer) confirm() bool {
	s, sl := d.s, d.win.oldest()
	err := sl.p.Error()
	n := uint64(sl.n)
	switch {
	case errors.Is(err, errBadRecord) || errors.Is(err, ErrUnmappable):
		s.log.Warn("north: record dropped", "seq", sl.last, "err", err)
		s.c.dropped.Add(n)
	case err != nil:
		s.c.failed.Add(n)
		return false
	default:
		s.c.published.Add(n)
		s.c.drained.Add(uint64(sl.backlog))
	}
	d.acked, d.unacked = sl.last, d.unacked+sl.n
	d.flying -= sl.n
	d.win.pop()
	if d.unacked >= ackRun {
		d.ack()
	}
	return true
}

// ackRun is how many confirmed records may wait for one store Ack (each
// takes the queue's lock and walks the records' headers); fewer wait for
// the drainer's next refill or idle.
const ackRun = 256

// ack acks the store up to the newest confirmed record.
func (d *drainer) ack() {
	if d.acked == 0 {
		return
	}
	if err := d.s.store.Ack(d.acked); err != nil {
		d.s.log.Warn("north: store ack failed", "err", err)
	}
	d.acked, d.unacked = 0, 0
}

// idle waits for the oldest slot to settle, or, with room in the window,
// for a record appended; false when the link went down, the sink stopped
// or the oldest slot's ack is overdue.
func (d *drainer) idle() bool {
	s := d.s
	d.ack()
	var head, more <-chan struct{}
	wait := time.Second // nothing in flight: a missed signal costs a second, never a hang
	if d.win.len() > 0 {
		head = d.win.oldest().p.Done()
		wait = time.Until(d.win.oldest().sent.Add(ackTimeout))
	} else {
		more = s.store.Wait()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-s.stop:
		return false
	case <-d.down:
		s.c.failed.Add(uint64(d.flying))
		return false
	case <-head:
	case <-more:
	case <-s.appended: // live records to take, or records for a refill
	case <-t.C:
		if d.win.len() > 0 {
			s.c.failed.Add(uint64(d.flying))
			return false
		}
	}
	return true
}

// pacer spaces events at a rate: a token bucket one second deep, so a
// drain starts at once and then holds the rate. The clock is read only
// when the credit it counted is spent: a clock read costs 100 ns or more
// on some virtual machines, as much as the rest of a record's publish.
type pacer struct {
	every  time.Duration
	depth  int64     // the bucket: a second's events
	credit int64     // events that may go before the clock is read again
	since  time.Time // the clock's reading credit is counted to (zero: never read)
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
}

func newPacer(perSecond int) *pacer {
	perSecond = max(perSecond, 1)
	return &pacer{every: time.Second / time.Duration(perSecond), depth: int64(perSecond), now: time.Now, after: time.After}
}

// wait blocks until the next event may go; false if stop came first.
func (p *pacer) wait(stop <-chan struct{}) bool {
	for p.credit == 0 {
		now := p.now()
		p.earn(now)
		if p.credit > 0 {
			break
		}
		select {
		case <-p.after(p.since.Add(p.every).Sub(now)):
		case <-stop:
			return false
		}
	}
	p.credit--
	return true
}

// earn adds the events earned since the last reading, up to the bucket.
func (p *pacer) earn(now time.Time) {
	gone := now.Sub(p.since)
	if p.since.IsZero() || gone >= time.Second {
		p.credit, p.since = p.depth, now
		return
	}
	if n := int64(gone / p.every); n > 0 {
		p.credit = min(p.credit+n, p.depth)
		p.since = p.since.Add(time.Duration(n) * p.every)
	}
}
