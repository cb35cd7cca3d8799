package spool

import (
	"bufio"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Open's recovery: every segment is read once, end to end, and each
// record's seq and CRC are checked. A segment ends at its first record
// that fails (a torn or zero-filled write, garbage, a flipped bit): the
// file is truncated there, the cut is counted in Stats.CutTails and
// Stats.CutBytes, and recovery goes on with the next segment. In the last
// segment that is the usual torn tail; in an older one it loses the rest
// of that segment only, never what a later segment holds. A segment whose
// header is not ours is cut whole (removed).

// scanned is what recovery learns from one segment file.
type scanned struct {
	seg     segment
	liveOff int64 // offset of its first record with seq > cursor (seg.size when none)
	live    int64 // how many records it holds with seq > cursor
	cut     int64 // bytes cut off it
	bad     bool  // its header is not ours: the whole file was cut
}

// scanSegment reads one segment, truncates it after its last good record
// and reports what it holds. Only I/O errors are errors.
func scanSegment(path string, first, cursor uint64, buf []byte) (scanned, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return scanned{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return scanned{}, err
	}
	size := info.Size()
	hdr := make([]byte, segHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil || !segHeaderOK(hdr, first) {
		return scanned{cut: size, bad: true}, nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(f, segHeaderSize, size-segHeaderSize), 64<<10)
	sc := scanRecords(r, size, first, cursor, buf)
	if sc.seg.size < size {
		sc.cut = size - sc.seg.size
		if err := f.Truncate(sc.seg.size); err != nil {
			return scanned{}, err
		}
		if err := f.Sync(); err != nil {
			return scanned{}, err
		}
	}
	return sc, nil
}

// scanRecords walks the records after a segment's header while they are
// whole, in seq order and match their CRC; buf is scratch for the data.
func scanRecords(r *bufio.Reader, size int64, first, cursor uint64, buf []byte) scanned {
	off, next := int64(segHeaderSize), first
	var hb [recHeaderSize]byte
	var sc scanned
records:
	for {
		if _, err := io.ReadFull(r, hb[:]); err != nil {
			break
		}
		h := parseRecHeader(hb[:])
		end := off + recHeaderSize + int64(h.len)
		if h.seq != next || h.len > HardMaxRecord || end > size {
			break
		}
		crc := crc32.Update(0, castagnoli, hb[4:])
		for left := int(h.len); left > 0; {
			n, err := io.ReadFull(r, buf[:min(left, len(buf))])
			if err != nil {
				break records
			}
			crc = crc32.Update(crc, castagnoli, buf[:n])
			left -= n
		}
		if crc != h.crc {
			break
		}
		if h.seq > cursor {
			if sc.live == 0 {
				sc.liveOff = off
			}
			sc.live++
		}
		off, next = end, next+1
	}
	if sc.live == 0 {
		sc.liveOff = off
	}
	sc.seg = segment{first: first, next: next, size: off}
	return sc
}

// listSegments returns the first seqs of the segment files in dir, in
// order; other files are not the queue's and are left alone.
func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var firsts []uint64
	for _, e := range entries {
		if first, ok := parseSegName(e.Name()); ok && e.Type().IsRegular() {
			firsts = append(firsts, first)
		}
	}
	slices.Sort(firsts)
	return firsts, nil
}

// readCursor returns the seq the cursor file holds: 0 when there is none
// or it is not whole (then every record on disk is delivered again, which
// at-least-once allows).
func readCursor(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, cursorFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	seq, _ := parseCursor(b)
	if seq >= 1<<63 { // not a count of records ever appended: a bad file
		seq = 0
	}
	return seq, nil
}

// recover rebuilds the queue's state from dir and its cursor file: it
// scans every segment, removes the fully done ones before the first live
// record and finds the head. It runs before the queue is shared.
func (q *Queue) recover() error {
	cursor, err := readCursor(q.o.Dir)
	if err != nil {
		return err
	}
	q.cursor, q.persisted = cursor, cursor
	return q.load(cursor)
}

// load scans the directory's segments and adopts them, everything up to
// cursor being done.
func (q *Queue) load(cursor uint64) error {
	firsts, err := listSegments(q.o.Dir)
	if err != nil {
		return err
	}
	buf := make([]byte, 32<<10)
	var found []scanned
	var prevNext uint64
	for _, first := range firsts {
		path := filepath.Join(q.o.Dir, segName(first))
		var sc scanned
		if first < prevNext { // overlaps the segment before it: cut whole
			info, err := os.Stat(path)
			if err != nil {
				return err
			}
			sc = scanned{cut: info.Size(), bad: true}
		} else if sc, err = scanSegment(path, first, cursor, buf); err != nil {
			return err
		}
		if sc.cut > 0 {
			q.stats.CutTails++
			q.stats.CutBytes += sc.cut
		}
		if sc.bad {
			if err := os.Remove(path); err != nil {
				return err
			}
			continue
		}
		found = append(found, sc)
		prevNext = sc.seg.next
	}
	return q.adopt(found, cursor)
}

// rescan rebuilds the queue's state from its directory as Open does, from
// the cursor in memory, when a record that Open verified no longer reads
// back whole (the disk changed under the running process): that record
// and the rest of its segment are cut and counted like a bad tail at Open,
// instead of stopping the drainer. Seqs already handed out stay used.
func (q *Queue) rescan() error {
	q.appendMu.Lock()
	defer q.appendMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	return q.rescanLocked()
}

// rescanLocked is rescan with appendMu and mu held. If it fails the queue
// is left failed: every later call but Close returns the error.
func (q *Queue) rescanLocked() error {
	prevNext := q.nextSeq
	for _, f := range []*os.File{q.tail, q.rf} {
		if f != nil {
			f.Close()
		}
	}
	q.tail, q.rf = nil, nil
	q.segs, q.disk, q.records, q.head = nil, 0, 0, head{}
	q.marks = q.marks[:0]
	q.stale = false
	if err := q.load(q.cursor); err != nil {
		q.failed = err
		return err
	}
	q.nextSeq = max(q.nextSeq, prevNext) // the next Append rolls past a cut tail
	return nil
}

// noteCorrupt marks the state stale after err, if it is ErrCorrupt: the
// head may be half moved, so nothing may use it before a rescan.
func (q *Queue) noteCorrupt(err error) {
	if errors.Is(err, ErrCorrupt) {
		q.stale = true
	}
}

// usable says why the queue's state may not be used, if it may not:
// closed, failed, or stale (ErrCorrupt: rescan first). mu is held.
func (q *Queue) usable() error {
	switch {
	case q.closed:
		return ErrClosed
	case q.failed != nil:
		return q.failed
	case q.stale:
		return ErrCorrupt
	}
	return nil
}
