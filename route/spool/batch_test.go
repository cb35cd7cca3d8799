package spool

import (
	"errors"
	"testing"
)

// appendBatches appends payload(from..from+n-1) with sizes size(i) in
// batches of 1, 2, 3, ... records, checking that the seqs run on.
func appendBatches(t *testing.T, q *Queue, from, n int, size func(int) int) {
	t.Helper()
	for i, k := from, 1; i < from+n; k++ {
		var batch [][]byte
		for j := i; j < min(i+k, from+n); j++ {
			batch = append(batch, payload(j, size(j)))
		}
		first, got, err := q.AppendBatch(batch)
		if err != nil || got != len(batch) || first != uint64(i+1) {
			t.Fatalf("AppendBatch of %d at %d: first %d, %d appended, %v", len(batch), i, first, got, err)
		}
		i += len(batch)
	}
}

// AppendBatch leaves what Append one by one leaves: the same records,
// seqs and segment files (rolls where Append rolls), across a restart.
func TestAppendBatchLikeAppends(t *testing.T) {
	size := func(i int) int { return 50 + i*37%400 }
	one, batched := smallOpts(t.TempDir()), smallOpts(t.TempDir())
	qa, qb := openQ(t, one), openQ(t, batched)
	const n = 700
	for i := range n {
		if seq, err := qa.Append(payload(i, size(i))); err != nil || seq != uint64(i+1) {
			t.Fatalf("Append %d: %d, %v", i, seq, err)
		}
	}
	appendBatches(t, qb, 0, n, size)
	fa, fb := segFiles(t, one.Dir), segFiles(t, batched.Dir)
	if len(fa) != len(fb) || len(fa) < 5 {
		t.Fatalf("%d segments one by one, %d in batches", len(fa), len(fb))
	}
	for i := range fa {
		if fileSize(t, fa[i]) != fileSize(t, fb[i]) {
			t.Fatalf("segment %d: %d bytes one by one, %d in batches", i, fileSize(t, fa[i]), fileSize(t, fb[i]))
		}
	}
	qb.Close()
	qb = openQ(t, batched)
	if st := qb.Stats(); st.CutTails != 0 || st.Records != n {
		t.Fatalf("reopened: %+v", st)
	}
	all := drainAll(t, qb, 64)
	for i, r := range all {
		if r.Seq != uint64(i+1) || string(r.Data) != string(payload(i, size(i))) {
			t.Fatalf("record %d: seq %d, data %q", i, r.Seq, r.Data)
		}
	}
}

// With SyncAlways a batch that stays in one segment is one fsync, not
// one per record.
func TestAppendBatchSyncsOnce(t *testing.T) {
	q := openQ(t, Options{Dir: t.TempDir(), Sync: SyncAlways})
	before := q.Stats().Syncs
	batch := make([][]byte, 50)
	for i := range batch {
		batch[i] = payload(i, 100)
	}
	if _, n, err := q.AppendBatch(batch); err != nil || n != 50 {
		t.Fatalf("AppendBatch: %d, %v", n, err)
	}
	if d := q.Stats().Syncs - before; d != 1 {
		t.Fatalf("%d fsyncs for one batch, want 1", d)
	}
}

// At the cap: DropOldest keeps the bound as Append does; Refuse appends
// the records that fit and says which one it refused; a record over
// MaxRecord stops the batch where it is.
func TestAppendBatchCapAndLimits(t *testing.T) {
	dir := t.TempDir()
	o := capOpts(dir, DropOldest)
	q := openQ(t, o)
	for i := 0; i < 3000; i += 100 { // the bound holds after every batch
		appendBatches(t, q, i, 100, func(int) int { return 200 })
		if d := diskBytes(t, dir); d > o.MaxBytes+o.SegmentBytes-segHeaderSize {
			t.Fatalf("%d bytes on disk", d)
		}
		if st := q.Stats(); st.Bytes > o.MaxBytes {
			t.Fatalf("Stats.Bytes %d > MaxBytes", st.Bytes)
		}
	}
	if st := q.Stats(); st.Bytes > o.MaxBytes || st.Dropped == 0 || int64(st.Dropped)+st.Records != 3000 {
		t.Fatalf("stats %+v", st)
	}
	checkPayloads(t, drainAll(t, q, 500), int(q.Stats().Dropped), 200)

	r := openQ(t, capOpts(t.TempDir(), Refuse))
	const frame = recHeaderSize + 200
	filled := 0
	for r.Stats().Bytes+2*frame+segHeaderSize <= o.MaxBytes { // room for one, not four
		appendN(t, r, filled, 1, 200)
		filled++
	}
	batch := [][]byte{payload(filled, 200), payload(filled+1, 200), payload(filled+2, 200), payload(filled+3, 200)}
	first, n, err := r.AppendBatch(batch)
	st := r.Stats()
	if !errors.Is(err, ErrFull) || (n > 0 && first != uint64(filled+1)) || n >= len(batch) || st.Records != int64(filled+n) || st.Refused != 1 {
		t.Fatalf("AppendBatch at the cap: first %d, %d appended, %v; stats %+v", first, n, err, st)
	}

	big := openQ(t, Options{Dir: t.TempDir(), MaxRecord: 1000})
	first, n, err = big.AppendBatch([][]byte{payload(0, 10), payload(1, 10), make([]byte, 1001), payload(3, 10)})
	if !errors.Is(err, ErrTooLarge) || first != 1 || n != 2 || big.Stats().Records != 2 {
		t.Fatalf("a record too large third: first %d, %d appended, %v", first, n, err)
	}
}
