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
	if len(data) > q.o.MaxRecord {
		return 0, ErrTooLarge
	}
	q.appendMu.Lock()
	defer q.appendMu.Unlock()
	if err := q.syncErr; err != nil { // from the background fsync
		q.syncErr = nil
		return 0, err
	}
	q.mu.Lock()
	seq, now, err := q.appendLocked(data)
	if errors.Is(err, ErrCorrupt) { // a record dropped at the cap went bad
		if err = q.rescanLocked(); err == nil {
			seq, now, err = q.appendLocked(data)
		}
	}
	q.mu.Unlock()
	if err != nil {
		return 0, err
	}
	q.dirty = true
	switch q.o.Sync {
	case SyncAlways:
		err = q.syncTail(now)
	case SyncInterval:
		if now.Sub(q.lastSync) >= q.o.SyncEvery {
			err = q.syncTail(now)
		}
	}
	return seq, err
}

// appendLocked makes room, writes the framed record at the tail's end
// and counts it. The tail's size moves only after a whole write, so a
// failed write is overwritten by the next one.
func (q *Queue) appendLocked(data []byte) (uint64, time.Time, error) {
	if err := q.usable(); err != nil {
		return 0, time.Time{}, err
	}
	frame := int64(recHeaderSize + len(data))
	last := q.segs[len(q.segs)-1]
	roll := last.next != q.nextSeq || (last.size+frame > q.o.SegmentBytes && last.size > segHeaderSize)
	need := frame
	if roll {
		need += segHeaderSize
	}
	if err := q.makeRoom(need); err != nil {
		q.noteCorrupt(err)
		return 0, time.Time{}, err
	}
	if roll {
		if err := q.roll(); err != nil {
			return 0, time.Time{}, err
		}
	}
	tail := &q.segs[len(q.segs)-1] // after makeRoom and roll, which move segs
	now := q.o.Now()
	seq := q.nextSeq
	if cap(q.wbuf) < int(frame) {
		q.wbuf = make([]byte, frame)
	}
	buf := q.wbuf[:frame]
	copy(buf[recHeaderSize:], data)
	putRecHeader(buf, seq, now.UnixNano(), buf[recHeaderSize:])
	if _, err := q.tail.WriteAt(buf, tail.size); err != nil {
		return 0, time.Time{}, err
	}
	tail.size += frame
	tail.next++
	q.disk += frame
	q.nextSeq++
	q.records++
	q.stats.Appended++
	if q.records == 1 {
		q.head = head{off: tail.size - frame, seq: seq, size: frame, time: now.UnixNano()}
		select {
		case q.wait <- struct{}{}:
		default:
		}
	}
	return seq, now, nil
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
