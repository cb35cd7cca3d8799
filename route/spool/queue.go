package spool

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Errors a Queue returns.
var (
	ErrFull     = errors.New("spool: queue full")
	ErrTooLarge = errors.New("spool: record larger than MaxRecord")
	ErrClosed   = errors.New("spool: queue closed")
	ErrLocked   = errors.New("spool: directory in use by another queue")
	// ErrCorrupt: a record that Open verified no longer reads back whole
	// (the disk changed under the running process). Peek, Ack and Append
	// do not return it: they rescan the directory as Open does, which
	// cuts and counts the bad record and the rest of its segment.
	ErrCorrupt = errors.New("spool: record corrupt on disk")
	// ErrAckAhead: Ack of a seq that was never handed out.
	ErrAckAhead = errors.New("spool: ack of a seq not yet appended")
)

// Record is one queued record.
type Record struct {
	Seq  uint64
	Time time.Time // when it was appended (kept on disk)
	Data []byte
}

// Stats is a snapshot of a queue. Records, Bytes, DiskBytes and Oldest
// describe what it holds now; the counters count since Open.
type Stats struct {
	Records   int64     // records appended and not yet acked or dropped
	Bytes     int64     // bytes the cap applies to: their frames + segment headers
	DiskBytes int64     // bytes of the segment files (Bytes + the acked head of the oldest)
	Oldest    time.Time // when the oldest record was appended; zero when empty
	OldestSeq uint64    // the oldest record's seq; 0 when empty
	Appended  uint64
	Acked     uint64 // records removed by Ack
	Dropped   uint64 // records dropped at the cap (DropOldest)
	Refused   uint64 // Appends refused at the cap (Refuse)
	CutTails  uint64 // segments Open cut short (or removed) after a bad record
	CutBytes  int64  // bytes those cuts removed
	Syncs     uint64 // fsyncs of appended records (of the tail segment)
}

// segment is one segment file; records in it have seqs first..next-1.
type segment struct {
	first uint64
	next  uint64
	size  int64 // bytes in the file, header included
}

// head is the oldest live record: its place in segs[0] and what its
// header says (seq, size, time are valid only while records > 0). With
// no live record, off is the end of the only segment.
type head struct {
	off  int64
	seq  uint64
	size int64 // framed: header + data
	time int64
}

// mark is where a record returned by the last Peek ends, so that Ack of
// a peeked seq moves the head without reading headers again.
type mark struct {
	seq, seg uint64 // the record's seq and its segment's first seq
	end      int64
	size     int64 // framed: header + data
	time     int64 // its header's
}

// Queue is a bounded on-disk FIFO of records. All methods are safe for
// concurrent use; it is built for one appender and one drainer. Two
// drainers would Peek the same records.
type Queue struct {
	o    Options
	lock *os.File

	// appendMu serialises what writes the tail: Append, its fsync (done
	// outside mu so a drainer is not held up by it), the background sync
	// and Close. Lock order: appendMu, cursorMu, mu.
	appendMu sync.Mutex
	dirty    bool      // appended since the last fsync
	syncErr  error     // of the background fsync, for the next Append
	lastSync time.Time // of the tail, by the Now clock
	wbuf     []byte    // frame of the record being appended
	syncs    atomic.Uint64

	cursorMu  sync.Mutex
	persisted uint64 // the cursor value on disk

	mu      sync.Mutex
	closed  bool
	failed  error     // a rescan that could not read the directory
	stale   bool      // a record went bad after Open: rescan before use
	segs    []segment // oldest first; the last is the tail
	tail    *os.File  // the last segment, open for reading and writing
	rf      *os.File  // read handle on the segment rfSeg (not the tail)
	rfSeg   uint64
	rbuf    []byte // Peek's read buffer
	marks   []mark
	head    head
	records int64
	disk    int64  // sum of segment sizes
	nextSeq uint64 // the seq the next Append gets
	cursor  uint64 // every seq <= cursor is acked or dropped
	stats   Stats  // counters only

	wait chan struct{}
	stop chan struct{} // closed by Close: the sync loop ends
	done chan struct{} // closed by the sync loop when it has ended
}

// Open opens (creating if missing) the queue in o.Dir and recovers what
// it holds; a bad tail is cut and counted, never an error. A directory
// another Queue holds open gives ErrLocked.
func Open(o Options) (*Queue, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o750); err != nil {
		return nil, err
	}
	lock, err := lockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	q := &Queue{o: o, lock: lock, wait: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
		rbuf: make([]byte, 64<<10), lastSync: o.Now()}
	if err := q.recover(); err != nil {
		q.closeFiles()
		return nil, err
	}
	go q.syncLoop()
	return q, nil
}

// adopt takes the scanned segments as the queue's state: the done ones
// before the first live record go, the last becomes the tail.
func (q *Queue) adopt(found []scanned, cursor uint64) error {
	for len(found) > 1 && found[0].live == 0 {
		if err := os.Remove(q.segPath(found[0].seg.first)); err != nil {
			return err
		}
		found = found[1:]
	}
	q.nextSeq = cursor + 1
	if n := len(found); n > 0 && found[n-1].seg.next > q.nextSeq {
		q.nextSeq = found[n-1].seg.next
	}
	if len(found) == 0 {
		f, err := q.createSegment(q.nextSeq)
		if err != nil {
			return err
		}
		q.tail, q.head.off = f, segHeaderSize
		return nil
	}
	for _, sc := range found {
		q.segs = append(q.segs, sc.seg)
		q.disk += sc.seg.size
		q.records += sc.live
	}
	q.head.off = found[0].liveOff
	f, err := os.OpenFile(q.segPath(q.segs[len(q.segs)-1].first), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	q.tail = f
	if q.o.Sync != SyncNever {
		if err := syncDir(q.o.Dir); err != nil {
			return err
		}
	}
	if q.records > 0 {
		return q.readHead()
	}
	return nil
}

func (q *Queue) segPath(first uint64) string { return filepath.Join(q.o.Dir, segName(first)) }

// createSegment makes the segment file for first and adds it to segs. A
// file it could not finish is removed, so that the next try can create it.
func (q *Queue) createSegment(first uint64) (*os.File, error) {
	path := q.segPath(first)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o640)
	if err != nil {
		return nil, err
	}
	var hdr [segHeaderSize]byte
	putSegHeader(hdr[:], first)
	_, err = f.WriteAt(hdr[:], 0)
	if err == nil && q.o.Sync != SyncNever {
		if err = f.Sync(); err == nil {
			err = syncDir(q.o.Dir)
		}
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	q.segs = append(q.segs, segment{first: first, next: first, size: segHeaderSize})
	q.disk += segHeaderSize
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// used is what the cap applies to: the disk bytes but the done records
// at the front of the oldest segment (they go when it goes).
func (q *Queue) used() int64 { return q.disk - (q.head.off - segHeaderSize) }

// Stats returns a snapshot.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.Records, s.Bytes, s.DiskBytes = q.records, q.used(), q.disk
	s.Syncs = q.syncs.Load()
	if q.records > 0 {
		s.Oldest, s.OldestSeq = time.Unix(0, q.head.time), q.head.seq
	}
	return s
}

// Wait returns a channel that receives when a record is appended to an
// empty queue, and is closed by Close: a drainer that found the queue
// empty sleeps on it. A receive may be stale (Peek again).
func (q *Queue) Wait() <-chan struct{} { return q.wait }

// Close stops the background sync, fsyncs the tail, writes the cursor
// and releases the directory. Later calls return ErrClosed.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.closed = true
	close(q.wait)
	q.mu.Unlock()
	close(q.stop)
	<-q.done
	q.appendMu.Lock() // an Append in flight finishes first
	defer q.appendMu.Unlock()
	var err error
	if q.tail != nil { // nil after a failed rescan
		err = q.tail.Sync()
	}
	if cerr := q.writeCursor(true); err == nil {
		err = cerr
	}
	if cerr := q.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

// closeFiles closes every file the queue holds, the lock last.
func (q *Queue) closeFiles() error {
	var err error
	for _, f := range []*os.File{q.tail, q.rf, q.lock} {
		if f != nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}
	return err
}
