// Package spool is a bounded on-disk FIFO of records: the disk half of a
// sink's store-and-forward. An appender adds records while the uplink is
// down; a drainer Peeks the oldest, sends them, and Acks them.
//
// API: as first agreed, plus Stats.DiskBytes and Stats.Syncs,
// ErrCorrupt, ErrAckAhead, the Default* constants and String methods on
// the two policies.
//
// # Why ours
//
// github.com/tidwall/wal has no byte cap, no drop-oldest or refuse, no
// CRC per record (a flipped bit is read back), and fails Open on a torn
// tail instead of cutting it. github.com/nsqio/go-diskqueue has no cap on
// the total size, no CRC, skips a whole file on a bad read, and counts a
// record as read when it is handed out (at-most-once), not when acked.
//
// # On disk
//
// A queue is a directory: segment files named after their first record's
// seq (0000000000000001.seg), a cursor file and a lock file (flock: a
// second Open of the directory, in this process or another, gets
// ErrLocked). A record is a 24-byte header (crc32c, length, seq, append
// time) and its data; format.go has the layout. Seqs start at 1, grow by
// one per Append and are not handed out again after a restart, even when
// every segment was acked and removed (the newest segment always stays).
//
// # Guarantees
//
//   - A record whose Append or AppendBatch returned is never lost when the
//     process dies (SIGKILL, panic): it was written (pwrite, no buffer in
//     the process) before the call returned, so it is in the kernel's page
//     cache, whatever the sync policy. AppendBatch writes the records that
//     go in one segment with one pwrite. TestSIGKILLLosesNothingSynced
//     kills a child mid-stream that appends one by one and in batches.
//   - When the machine dies (power, kernel), SyncAlways loses nothing whose
//     Append returned (an AppendBatch fsyncs once, before it returns); SyncInterval loses at most what was appended in
//     the last SyncEvery (the background fsync runs every SyncEvery when
//     anything was appended, and an Append that finds the last fsync older
//     than SyncEvery fsyncs itself) plus one fsync's duration; SyncNever
//     loses what the kernel had not written back (up to ~30 s on Linux).
//   - Delivery is at-least-once. Ack moves the cursor at once in memory,
//     so in one process life an acked record is never Peeked again. The
//     cursor reaches the disk before Ack returns with SyncAlways, else
//     within SyncEvery, and at Close; after a crash, records acked (or
//     dropped) in that window are delivered again.
//   - Open never fails on bad data. It reads every segment once (so it
//     costs a read of the queue at disk speed) and checks each record's
//     seq and CRC; a segment ends at its first bad record (torn write,
//     zeros, garbage, a flipped bit): the file is cut there, counted in
//     CutTails and CutBytes (log them from Stats), and Appends go on. A
//     bad record in an older segment loses the rest of that segment only;
//     the next segment is read as usual and the seqs skip the gap. A
//     segment whose header is not ours is removed, counted the same way.
//     A cut record's seq may be handed out again (it was never durable).
//     A cursor file that is not whole is read as 0: everything on disk is
//     delivered again, nothing is lost.
//   - A record that goes bad after Open (the disk changed under the running
//     process) does not stop the drainer: Peek, Ack or Append finds it,
//     the queue rescans its directory as Open does (from the cursor in
//     memory), and the cut is counted the same way; seqs already handed
//     out are not handed out again.
//
// # The cap
//
// Bytes (Stats.Bytes) is what the cap applies to: every record not yet
// acked or dropped, framed, plus the segment headers. Append keeps it at
// or under MaxBytes: DropOldest drops whole records from the head first
// (Stats.Dropped), Refuse returns ErrFull (Stats.Refused) and keeps every
// queued record. Records acked or dropped at the front of the oldest
// segment stay on disk until all of that segment is done, so the segment
// files (Stats.DiskBytes) stay under MaxBytes + SegmentBytes -
// 16 (TestCapDropOldest checks after every Append). A record larger than
// MaxRecord is ErrTooLarge. A failed write (a full disk) is returned by
// Append; the record is not queued.
//
// # Concurrency
//
// Every method is safe for concurrent use. Built for one appender and one
// drainer at once (an fsync in Append does not hold up Peek and Ack);
// more appenders are serialised; two drainers would Peek the same
// records. Stats may be called from anywhere, often. Options.Now is
// called with the append lock held only.
//
// # Benchmarks
//
// go test -bench . -benchmem ./route/spool, 256-byte records, ext4 on a
// virtio disk, a 2-core AMD EPYC VM shared with other builds: smoke
// figures (load average 4.2 at the start, 3.7 at the end; the AppendBatch
// rows from a second run at 3.4-3.5, after it dropped at the cap for a
// whole run). Per record:
//
//	Append/never           2092 ns/op    478,000 records/s  0 allocs/op
//	Append/interval        3093 ns/op    323,000 records/s  0 allocs/op
//	Append/always        468707 ns/op      2,100 records/s  0 allocs/op
//	AppendBatch/never       919 ns/op  1,088,000 records/s  (batches of 64)
//	AppendBatch/interval   1300 ns/op    771,000 records/s
//	AppendBatch/always     6398 ns/op    157,000 records/s  (an fsync per batch)
//	Drain/never             633 ns/op  1,579,000 records/s  (Peek 256, Ack)
//	Drain/always           4694 ns/op    213,000 records/s  (Peek 256, Ack)
//	Open64MiB                35 ms/op   1.9 GB/s from the page cache
//
// In the second run, beside AppendBatch, Append/never took 1837 ns and
// Append/interval 2011 ns: a batch of 64 costs about half of 64 Appends
// per record at this load (an earlier run of 200,000 records at load 2
// gave 487 ns against 1245 ns), and with SyncAlways one fsync per batch
// instead of one per record. A long benchmark run fills the 256 MiB
// default cap, so its later records also drop the oldest.
//
// Open from a cold disk is one sequential read of the queue: a full
// 256 MiB queue on an SD card at 25 MB/s takes about 10 s to recover.
//
// Append is one pwrite (plus an fsync per record with SyncAlways: a sink
// that needs it should know it costs a disk round trip per message,
// several ms on an SD card); AppendBatch is one pwrite per run of records
// that go in one segment. A drain Ack with SyncAlways writes the cursor
// with two fsyncs. Peek allocates the records it returns (a few
// allocations per call, not one per record); PeekAfter reads on from
// where the last peek stopped, so a drainer that keeps records in flight
// reads each record once.
package spool
