package spool

import (
	"errors"
	"os"
	"slices"
	"sort"
	"time"
)

// Peek returns up to max of the oldest records, in order, without
// removing them: a second Peek without an Ack returns them again. It
// stops before the record that would take the data past maxBytes (<= 0:
// no byte limit), but returns at least one record when there is one. The
// records' Data are the caller's. An empty queue returns no records and
// no error (sleep on Wait).
func (q *Queue) Peek(max int, maxBytes int) ([]Record, error) {
	return q.PeekAfter(0, max, maxBytes)
}

// PeekAfter is Peek of the records whose seq is greater than after: what
// Peek would return with the records up to after left out first. A
// drainer that keeps records in flight passes the last seq it sent, so
// it reads each record once. When after is the last seq the previous
// Peek or PeekAfter returned (Acks in between do not matter), it goes on
// from where that one stopped; otherwise (a drop at the cap, a rescan, a
// cut, another after) it reads from the oldest record, checking and
// skipping those up to after. The checks and the handling of a corrupt
// record are Peek's.
func (q *Queue) PeekAfter(after uint64, max int, maxBytes int) ([]Record, error) {
	recs, err := q.peek(after, max, maxBytes)
	if errors.Is(err, ErrCorrupt) {
		if err = q.rescan(); err == nil {
			recs, err = q.peek(after, max, maxBytes)
		}
	}
	return recs, err
}

func (q *Queue) peek(after uint64, max int, maxBytes int) ([]Record, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.usable(); err != nil {
		return nil, err
	}
	if q.records == 0 {
		q.marks = q.marks[:0]
		return nil, nil
	}
	if after+1 >= q.nextSeq {
		return nil, nil // nothing after it yet; the marks stay good
	}
	if int64(max) > q.records {
		max = int(q.records)
	}
	max = maxInt(max, 1)
	w := peekWalk{recs: make([]Record, 0, max), maxBytes: maxBytes, from: after + 1}
	seg, off, next, ok := q.resume(after)
	if !ok { // from the head; the marks start there again
		q.marks = q.marks[:0]
		seg, off, next = 0, q.head.off, q.head.seq
	}
	for len(w.recs) < max && !w.full {
		s := q.segs[seg]
		if off >= s.size {
			if seg == len(q.segs)-1 {
				break
			}
			seg, off, next = seg+1, segHeaderSize, q.segs[seg+1].first
			continue
		}
		n, err := q.peekChunk(&w, seg, off, next, max)
		if err != nil {
			q.marks = q.marks[:0]
			q.noteCorrupt(err)
			return nil, err
		}
		off += n
		next = w.next
	}
	return w.recs, nil
}

// resume returns where the record after seq after starts when the marks
// end at after (they start at the head), and the segment that held the
// last marked record is still there.
func (q *Queue) resume(after uint64) (seg int, off int64, next uint64, ok bool) {
	n := len(q.marks)
	if n == 0 || q.marks[0].seq != q.head.seq || q.marks[n-1].seq != after {
		return 0, 0, 0, false
	}
	m := q.marks[n-1]
	i := sort.Search(len(q.segs), func(i int) bool { return q.segs[i].first >= m.seg })
	if i == len(q.segs) || q.segs[i].first != m.seg || m.end > q.segs[i].size {
		return 0, 0, 0, false
	}
	return i, m.end, after + 1, true
}

// peekWalk is what Peek has gathered so far.
type peekWalk struct {
	recs     []Record
	total    int
	maxBytes int
	full     bool // the next record would pass maxBytes
	next     uint64
	from     uint64 // records before this seq are checked and marked, not kept
}

// own copies the data of recs, which point into the read buffer, into
// one allocation of their exact size: each chunk's records cost one
// allocation, and none is copied twice.
func own(recs []Record) {
	n := 0
	for _, r := range recs {
		n += len(r.Data)
	}
	blob := make([]byte, n)
	for i := range recs {
		k := copy(blob, recs[i].Data)
		recs[i].Data, blob = blob[:k:k], blob[k:]
	}
}

// peekChunk reads from segment seg at off into rbuf and takes the whole
// records it finds (expected seq next first); it returns how many bytes
// of the segment it consumed. A record longer than rbuf grows it.
func (q *Queue) peekChunk(w *peekWalk, seg int, off int64, next uint64, max int) (int64, error) {
	s := q.segs[seg]
	f, err := q.fileFor(seg)
	if err != nil {
		return 0, err
	}
	n := int(min(int64(len(q.rbuf)), s.size-off))
	if _, err := f.ReadAt(q.rbuf[:n], off); err != nil {
		return 0, err
	}
	p, kept := 0, len(w.recs)
	defer func() { own(w.recs[kept:]) }() // before the next read reuses rbuf
	w.next = next
	for len(w.recs) < max {
		if n-p < recHeaderSize {
			break
		}
		h := parseRecHeader(q.rbuf[p:])
		if h.len > HardMaxRecord || h.seq != w.next || off+int64(p)+recHeaderSize+int64(h.len) > s.size {
			return 0, ErrCorrupt
		}
		frame := recHeaderSize + int(h.len)
		if n-p < frame {
			if p == 0 { // one record longer than the buffer
				q.rbuf = make([]byte, frame)
				return 0, nil
			}
			break
		}
		keep := h.seq >= w.from
		if keep && len(w.recs) > 0 && w.maxBytes > 0 && w.total+int(h.len) > w.maxBytes {
			w.full = true
			break
		}
		data := q.rbuf[p+recHeaderSize : p+frame]
		if recordCRC(q.rbuf[p:], data) != h.crc {
			return 0, ErrCorrupt
		}
		if keep {
			w.recs = append(w.recs, Record{Seq: h.seq, Time: time.Unix(0, h.time), Data: data})
			w.total += int(h.len)
		}
		p += frame
		w.next++
		q.marks = append(q.marks, mark{seq: h.seq, seg: s.first, end: off + int64(p), size: int64(frame), time: h.time})
	}
	if n-p < recHeaderSize && p == 0 {
		return 0, ErrCorrupt // a segment that ends inside a header
	}
	return int64(p), nil
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Ack marks every record up to and including seq done: they leave the
// queue, and a segment goes when all of its records are done. Acking a
// seq already done does nothing; a seq not yet appended is ErrAckAhead.
// With SyncAlways the cursor is on disk when Ack returns; otherwise
// within SyncEvery (see the package doc for what a crash redelivers).
func (q *Queue) Ack(seq uint64) error {
	q.mu.Lock()
	if err := q.usable(); err != nil {
		q.mu.Unlock()
		if errors.Is(err, ErrCorrupt) {
			if err = q.rescan(); err == nil {
				return q.Ack(seq)
			}
		}
		return err
	}
	if seq >= q.nextSeq {
		q.mu.Unlock()
		return ErrAckAhead
	}
	n, err := q.ackLocked(seq)
	q.noteCorrupt(err)
	q.stats.Acked += n
	q.cursor = max(q.cursor, seq)
	q.mu.Unlock()
	if errors.Is(err, ErrCorrupt) { // the new head went bad: cut it
		err = q.rescan()
	}
	if err != nil {
		return err
	}
	if q.o.Sync == SyncAlways {
		return q.writeCursor(true)
	}
	return nil
}

// ackLocked moves the head past seq and returns how many records left.
// Records the last Peek returned are skipped by their marks (and the
// mark after them is the new head, read from no file); any others by
// walking their headers (skip).
func (q *Queue) ackLocked(seq uint64) (uint64, error) {
	var n uint64
	if q.records > 0 && len(q.marks) > 0 && q.marks[0].seq == q.head.seq {
		k := sort.Search(len(q.marks), func(i int) bool { return q.marks[i].seq > seq })
		if k > 0 {
			m := q.marks[k-1]
			for len(q.segs) > 1 && q.segs[0].first != m.seg {
				if err := q.removeOldest(); err != nil {
					return n, err
				}
			}
			q.head.off = m.end
			q.records -= int64(k)
			n = uint64(k)
			q.marks = q.marks[:copy(q.marks, q.marks[k:])]
			if err := q.headFromMark(); err != nil {
				return n, err
			}
		}
	}
	k, err := q.skip(seq)
	return n + k, err
}

// headFromMark settles the head after an ack by marks: the first mark
// left, if any, is the head record already read; else its header is
// read.
func (q *Queue) headFromMark() error {
	if q.records == 0 || len(q.marks) == 0 {
		return q.settleHead()
	}
	m := q.marks[0]
	for len(q.segs) > 1 && q.segs[0].first != m.seg {
		if err := q.removeOldest(); err != nil {
			return err
		}
	}
	q.head = head{off: m.end - m.size, seq: m.seq, size: m.size, time: m.time}
	return nil
}

// skipRead is how much skip reads at once to pass the records up to seq:
// their share of the queue's bytes at its mean record size, and the next
// header, in whole pages, at most rbuf. A drainer acks often, a few
// records at a time: reading all of rbuf for each would cost more than
// the records.
func (q *Queue) skipRead(seq uint64) int64 {
	mean := q.used() / max(q.records, 1)
	want := int64(seq-q.head.seq+1)*mean + recHeaderSize
	want = (want + 4095) &^ 4095
	return min(want, int64(len(q.rbuf)))
}

// skip moves the head past every record up to seq (none peeked: a
// drainer that had them from elsewhere, as a sink its live messages),
// reading their headers a chunk at a time into rbuf rather than one
// read a record. Their CRCs are not checked: they are leaving.
func (q *Queue) skip(seq uint64) (uint64, error) {
	var n uint64
	for q.records > 0 && q.head.seq <= seq {
		q.marks = q.marks[:0]
		s := q.segs[0]
		f, err := q.fileFor(0)
		if err != nil {
			return n, err
		}
		end := min(q.head.off+q.skipRead(seq), s.size)
		chunk := q.rbuf[:end-q.head.off]
		if _, err := f.ReadAt(chunk, q.head.off); err != nil {
			return n, err
		}
		// The head's header is known; each step moves past the head and
		// reads the next one's from the chunk while it is there.
		base, known := q.head.off, true
		for known && q.records > 0 && q.head.seq <= seq {
			q.head.off += q.head.size
			q.records--
			n++
			known = false
			if p := q.head.off - base; q.records > 0 && q.head.off < s.size && p+recHeaderSize <= int64(len(chunk)) {
				h := parseRecHeader(chunk[p:])
				size := recHeaderSize + int64(h.len)
				if h.seq != q.head.seq+1 || h.len > HardMaxRecord || q.head.off+size > s.size {
					return n, ErrCorrupt
				}
				q.head.seq, q.head.size, q.head.time = h.seq, size, h.time
				known = true
			}
		}
		if !known {
			if err := q.settleHead(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// pop moves the head past its record (the caller counts it).
func (q *Queue) pop() error {
	q.head.off += q.head.size
	q.records--
	q.marks = q.marks[:0]
	return q.settleHead()
}

// settleHead removes the segments the head has left and reads the new
// head record's header.
func (q *Queue) settleHead() error {
	if err := q.dropDoneSegments(); err != nil {
		return err
	}
	if q.records > 0 {
		return q.readHead()
	}
	return nil
}

// dropDoneSegments removes the oldest segments while the head is past
// their end; the tail stays (its name keeps the next seq on disk).
func (q *Queue) dropDoneSegments() error {
	for len(q.segs) > 1 && q.head.off >= q.segs[0].size {
		if err := q.removeOldest(); err != nil {
			return err
		}
	}
	return nil
}

// removeOldest deletes segs[0] (never the tail) and puts the head at the
// start of the next one.
func (q *Queue) removeOldest() error {
	s := q.segs[0]
	if q.rf != nil && q.rfSeg == s.first {
		q.rf.Close()
		q.rf = nil
	}
	if err := os.Remove(q.segPath(s.first)); err != nil {
		return err
	}
	q.disk -= s.size
	q.segs = slices.Delete(q.segs, 0, 1)
	q.head.off = segHeaderSize
	return nil
}

// readHead reads the header of the record at the head.
func (q *Queue) readHead() error {
	s := q.segs[0]
	if q.head.off+recHeaderSize > s.size {
		return ErrCorrupt
	}
	f, err := q.fileFor(0)
	if err != nil {
		return err
	}
	var b [recHeaderSize]byte
	if _, err := f.ReadAt(b[:], q.head.off); err != nil {
		return err
	}
	h := parseRecHeader(b[:])
	size := recHeaderSize + int64(h.len)
	if h.seq < s.first || h.seq >= s.next || h.len > HardMaxRecord || q.head.off+size > s.size {
		return ErrCorrupt
	}
	q.head.seq, q.head.size, q.head.time = h.seq, size, h.time
	return nil
}

// fileFor returns a read handle on segs[i]: the tail's own, or rf.
func (q *Queue) fileFor(i int) (*os.File, error) {
	if i == len(q.segs)-1 {
		return q.tail, nil
	}
	first := q.segs[i].first
	if q.rf != nil && q.rfSeg == first {
		return q.rf, nil
	}
	if q.rf != nil {
		q.rf.Close()
		q.rf = nil
	}
	f, err := os.Open(q.segPath(first))
	if err != nil {
		return nil, err
	}
	q.rf, q.rfSeg = f, first
	return f, nil
}
