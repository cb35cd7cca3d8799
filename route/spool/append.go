package spool

import (
	"errors"
	"os"
	"path/filepath"
	"time"
)

// Append adds a record and returns its seq. Seqs grow by one per record
// and are never handed out twice in one directory, across restarts too.
// At the cap, DropOldest drops whole records from the head first and
// Refuse returns ErrFull. With SyncAlways the record is on disk when
// Append returns; if that fsync fails the error is returned and the
// record stays queued, maybe not on disk. A failed background fsync
// (SyncInterval) is returned by the next Append, which appends nothing.
func (q *Queue) Append(data []byte) (uint64, error) {
	one := [1][]byte{data}
	seq, _, err := q.AppendBatch(one[:])
	return seq, err
}

// AppendBatch appends the records of batch in order, as Append would one
// by one, but with one write for the records that go in the tail
// segment together (a roll or a drop at the cap starts another write),
// one Now for all, and with SyncAlways one fsync before it returns. It
// returns how many it appended, n, and their seqs first..first+n-1 (one
// by one: a rescan in between does not skip seqs); on an error, batch[n]
// is the record it was about (ErrTooLarge, ErrFull, a failed write) and
// the records after it were not tried. A record whose AppendBatch
// returned is in the file, as with Append.
func (q *Queue) AppendBatch(batch [][]byte) (first uint64, n int, err error) {
	q.appendMu.Lock()
	defer q.appendMu.Unlock()
	if err := q.syncErr; err != nil { // from the background fsync
		q.syncErr = nil
		return 0, 0, err
	}
	q.mu.Lock()
	now := q.o.Now()
	for n < len(batch) {
		if len(batch[n]) > q.o.MaxRecord {
			err = ErrTooLarge
			break
		}
		seq, k, aerr := q.appendRun(batch[n:], now)
		if errors.Is(aerr, ErrCorrupt) { // a record dropped at the cap went bad
			aerr = q.rescanLocked()
		}
		if n == 0 && k > 0 {
			first = seq
		}
		n += k
		if err = aerr; err != nil {
			break
		}
	}
	q.mu.Unlock()
	if n == 0 {
		return 0, 0, err
	}
	q.dirty = true
	var serr error
	switch q.o.Sync {
	case SyncAlways:
		serr = q.syncTail(now)
	case SyncInterval:
		if now.Sub(q.lastSync) >= q.o.SyncEvery {
			serr = q.syncTail(now)
		}
	}
	if err == nil {
		err = serr
	}
	return first, n, err
}

// maxRun bounds the bytes one write of AppendBatch takes (and so the
// write buffer the queue keeps).
const maxRun = 1 << 20

// appendRun appends, in one write, the longest run from the start of
// batch that fits in the tail with no roll and no drop at the cap; when
// the first record needs either, it appends that one alone. It returns
// the first one's seq and how many it appended.
func (q *Queue) appendRun(batch [][]byte, now time.Time) (uint64, int, error) {
	if err := q.usable(); err != nil {
		return 0, 0, err
	}
	tail := &q.segs[len(q.segs)-1]
	if tail.next != q.nextSeq { // after a rescan: appendOne rolls
		return q.appendOne(batch[0], now)
	}
	buf := q.wbuf[:0]
	free := q.o.MaxBytes - q.used()
	if q.o.Policy == DropOldest { // drops for the whole run, below
		free = q.o.MaxBytes / 2 // so that dropping every record makes room
	}
	k := 0
	for ; k < len(batch); k++ {
		d := batch[k]
		frame := recHeaderSize + len(d)
		size := tail.size + int64(len(buf))
		if len(d) > q.o.MaxRecord || int64(len(buf)+frame) > free || (k > 0 && len(buf)+frame > maxRun) ||
			(size+int64(frame) > q.o.SegmentBytes && size > segHeaderSize) {
			break
		}
		start := len(buf)
		buf = append(buf, make([]byte, recHeaderSize)...)
		buf = append(buf, d...)
		putRecHeader(buf[start:], q.nextSeq+uint64(k), now.UnixNano(), buf[start+recHeaderSize:])
	}
	q.wbuf = buf[:0]
	if k == 0 {
		return q.appendOne(batch[0], now)
	}
	if err := q.makeRoom(int64(len(buf))); err != nil { // DropOldest only
		q.noteCorrupt(err)
		return 0, 0, err
	}
	tail = &q.segs[len(q.segs)-1] // makeRoom may have moved segs
	if _, err := q.tail.WriteAt(buf, tail.size); err != nil {
		return 0, 0, err
	}
	first, off := q.nextSeq, tail.size
	q.commit(tail, int64(len(buf)), k)
	if q.records == int64(k) { // the queue was empty: the first is the head
		q.setHead(off, first, int64(recHeaderSize+len(batch[0])), now)
	}
	return first, k, nil
}

// appendOne makes room, writes the framed record at the tail's end and
// counts it. The tail's size moves only after a whole write, so a failed
// write is overwritten by the next one.
func (q *Queue) appendOne(data []byte, now time.Time) (uint64, int, error) {
	frame := int64(recHeaderSize + len(data))
	last := q.segs[len(q.segs)-1]
	roll := last.next != q.nextSeq || (last.size+frame > q.o.SegmentBytes && last.size > segHeaderSize)
	need := frame
	if roll {
		need += segHeaderSize
	}
	if err := q.makeRoom(need); err != nil {
		q.noteCorrupt(err)
		return 0, 0, err
	}
	if roll {
		if err := q.roll(); err != nil {
			return 0, 0, err
		}
	}
	tail := &q.segs[len(q.segs)-1] // after makeRoom and roll, which move segs
	seq := q.nextSeq
	if cap(q.wbuf) < int(frame) {
		q.wbuf = make([]byte, frame)
	}
	buf := q.wbuf[:frame]
	copy(buf[recHeaderSize:], data)
	putRecHeader(buf, seq, now.UnixNano(), buf[recHeaderSize:])
	if _, err := q.tail.WriteAt(buf, tail.size); err != nil {
		return 0, 0, err
	}
	q.commit(tail, frame, 1)
	if q.records == 1 {
		q.setHead(tail.size-frame, seq, frame, now)
	}
	return seq, 1, nil
}

// commit counts k records of bytes written at the tail's end.
func (q *Queue) commit(tail *segment, bytes int64, k int) {
	tail.size += bytes
	tail.next += uint64(k)
	q.disk += bytes
	q.nextSeq += uint64(k)
	q.records += int64(k)
	q.stats.Appended += uint64(k)
}

// setHead makes the record at off the head of an empty queue and wakes
// a drainer sleeping on Wait.
func (q *Queue) setHead(off int64, seq uint64, size int64, now time.Time) {
	q.head = head{off: off, seq: seq, size: size, time: now.UnixNano()}
	select {
	case q.wait <- struct{}{}:
	default:
	}
}

// makeRoom applies the policy when need more bytes would pass the cap.
func (q *Queue) makeRoom(need int64) error {
	if q.used()+need <= q.o.MaxBytes {
		return nil
	}
	if q.o.Policy == Refuse {
		q.stats.Refused++
		return ErrFull
	}
	for q.used()+need > q.o.MaxBytes && q.records > 0 {
		q.cursor = max(q.cursor, q.head.seq)
		q.stats.Dropped++
		if err := q.pop(); err != nil {
			return err
		}
	}
	return nil
}

// roll starts a new tail segment named after the next seq. The old tail
// is fsynced first (but with SyncNever), so that SyncInterval's window
// covers the records a roll leaves behind too.
func (q *Queue) roll() error {
	if q.o.Sync != SyncNever {
		q.syncs.Add(1)
		if err := q.tail.Sync(); err != nil {
			return err
		}
	}
	f, err := q.createSegment(q.nextSeq)
	if err != nil {
		return err
	}
	old := q.tail
	q.tail = f
	if err := old.Close(); err != nil {
		return err
	}
	return q.dropDoneSegments()
}

// syncTail fsyncs the tail; the caller holds appendMu.
func (q *Queue) syncTail(now time.Time) error {
	q.dirty = false
	q.lastSync = now
	if q.tail == nil { // after a failed rescan
		return nil
	}
	q.syncs.Add(1)
	return q.tail.Sync()
}

// syncLoop is the background half of SyncInterval (every SyncEvery, an
// fsync if anything was appended since the last), so a record is synced
// at most one tick after its Append; and every SyncEvery it writes the
// cursor if acks or drops moved it, whatever the sync policy.
func (q *Queue) syncLoop() {
	defer close(q.done)
	t := time.NewTicker(q.o.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-t.C:
		}
		if q.o.Sync == SyncInterval {
			q.appendMu.Lock()
			if q.dirty {
				q.syncErr = q.syncTail(q.o.Now()) // the next Append returns it
			}
			q.appendMu.Unlock()
		}
		q.writeCursor(q.o.Sync != SyncNever)
	}
}

// writeCursor puts the cursor on disk if it moved since it was last
// written: a new file renamed over the old one, so a crash leaves one or
// the other whole. With sync, the file and the directory are fsynced.
func (q *Queue) writeCursor(sync bool) error {
	q.cursorMu.Lock()
	defer q.cursorMu.Unlock()
	q.mu.Lock()
	seq := q.cursor
	q.mu.Unlock()
	if seq == q.persisted {
		return nil
	}
	var b [cursorSize]byte
	putCursor(b[:], seq)
	tmp := filepath.Join(q.o.Dir, cursorFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b[:])
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(q.o.Dir, cursorFile))
	}
	if err == nil && sync {
		err = syncDir(q.o.Dir)
	}
	if err == nil {
		q.persisted = seq
	}
	return err
}
