package north

// liveQueue holds the store records the forward goroutine published as
// they came (the link up), oldest first: the drainer takes their outcome
// instead of sending them again. Seqs only grow (one appender), so it is
// a FIFO, not a table: the drainer takes a run of consecutive live
// records without reading them back from the store, and entries it has
// passed (a record dropped at the cap, or sent by the drainer after the
// link went down and up) are thrown away as it goes. The Sink's liveMu
// guards it.
type liveQueue struct {
	recs []liveRec // recs[:head] are taken
	head int
}

// liveRec is one record published live and its outcome.
type liveRec struct {
	seq uint64
	p   Pending
}

func (q *liveQueue) len() int { return len(q.recs) - q.head }

func (q *liveQueue) push(seq uint64, p Pending) {
	if q.head > 0 && q.head == len(q.recs) { // empty: reuse the array from its start
		q.recs, q.head = q.recs[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.recs) { // mostly taken: move the rest down
		q.recs = q.recs[:copy(q.recs, q.recs[q.head:])]
		clear(q.recs[len(q.recs):cap(q.recs)])
		q.head = 0
	}
	q.recs = append(q.recs, liveRec{seq, p})
}

// dropBefore throws away the entries older than seq: the drainer is past
// them.
func (q *liveQueue) dropBefore(seq uint64) {
	for q.len() > 0 && q.recs[q.head].seq < seq {
		q.pop()
	}
}

func (q *liveQueue) pop() Pending {
	p := q.recs[q.head].p
	q.recs[q.head] = liveRec{}
	q.head++
	return p
}

// takeLive returns the live publishes of recs (consecutive seqs, as a
// Peek returns them) beside them in out (nil: not published live), and
// removes them from the live queue, in one hold of its lock (the forward
// goroutine holds it across each Append). One that failed is sent again
// by the drainer on its next round.
func (s *Sink) takeLive(recs []StoreRecord, out []Pending) []Pending {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if len(recs) > 0 {
		s.live.dropBefore(recs[0].Seq)
	}
	for _, r := range recs {
		var p Pending
		if s.live.len() > 0 && s.live.recs[s.live.head].seq == r.Seq {
			p = s.live.pop()
		}
		out = append(out, p)
	}
	s.signalLiveRoom()
	return out
}

// takeLiveRun takes up to max live records from seq next on while they
// follow one another without a gap, appending them to recs (a seq, no
// data: they are never decoded) and their publishes to out. None when the
// record next was not published live: the drainer reads it from the
// store. stored says whether the store holds a record past the run, seen
// under the lock the forward goroutine appends and publishes under: a
// drainer that has taken every live record and sees none stored waits
// for the next append rather than racing it with a read from disk.
func (s *Sink) takeLiveRun(next uint64, max int, recs []StoreRecord, out []Pending) (_ []StoreRecord, _ []Pending, stored bool) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	s.live.dropBefore(next)
	for n := 0; n < max && s.live.len() > 0 && s.live.recs[s.live.head].seq == next; n++ {
		recs = append(recs, StoreRecord{Seq: next})
		out = append(out, s.live.pop())
		next++
	}
	s.signalLiveRoom()
	// Seqs are consecutive and a store removes only from its head, so
	// its newest record is the oldest's seq plus the count less one.
	st := s.store.Stats()
	stored = st.Records > 0 && st.OldestSeq+uint64(st.Records)-1 >= next
	return recs, out, stored
}

// signalLiveRoom wakes a forward goroutine waiting for room in the live
// queue (waitLiveRoom).
func (s *Sink) signalLiveRoom() {
	select {
	case s.liveRoom <- struct{}{}:
	default:
	}
}
