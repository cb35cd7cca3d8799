package spool

import (
	"errors"
	"testing"
)

// capOpts: a 64 KiB cap in 16 KiB segments.
func capOpts(dir string, p Policy) Options {
	return Options{Dir: dir, MaxBytes: 64 << 10, SegmentBytes: 16 << 10, Policy: p, Sync: SyncNever, Now: fakeClock()}
}

// DropOldest keeps the segment files within MaxBytes + SegmentBytes -
// segHeaderSize (the acked or dropped front of the oldest segment is the
// excess), keeps the newest records, and counts every drop.
func TestCapDropOldest(t *testing.T) {
	dir := t.TempDir()
	o := capOpts(dir, DropOldest)
	q := openQ(t, o)
	const n, size = 3000, 200
	bound := o.MaxBytes + o.SegmentBytes - segHeaderSize
	for i := range n {
		if _, err := q.Append(payload(i, size)); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if d := diskBytes(t, dir); d > bound {
			t.Fatalf("after %d appends: %d bytes on disk, bound %d", i+1, d, bound)
		}
		if st := q.Stats(); st.Bytes > o.MaxBytes {
			t.Fatalf("after %d appends: Stats.Bytes %d > MaxBytes", i+1, st.Bytes)
		}
	}
	st := q.Stats()
	if st.Dropped == 0 || int64(st.Dropped)+st.Records != n || st.Refused != 0 {
		t.Fatalf("stats %+v: dropped + records should be %d", st, n)
	}
	// Restart: the drops' cursor was written at Close, so the dropped
	// records stay dropped.
	q.Close()
	q = openQ(t, o)
	if got := q.Stats().Records; got != st.Records {
		t.Fatalf("records after restart %d, before %d", got, st.Records)
	}
	all := drainAll(t, q, 50)
	if int64(len(all)) != st.Records || all[len(all)-1].Seq != n {
		t.Fatalf("kept %d records ending at seq %d; want the newest %d ending at %d", len(all), all[len(all)-1].Seq, st.Records, n)
	}
	checkPayloads(t, all, n-len(all), size)
}

// Refuse returns ErrFull at the cap, counts it and keeps every record
// already queued; acking makes room again.
func TestCapRefuse(t *testing.T) {
	dir := t.TempDir()
	o := capOpts(dir, Refuse)
	q := openQ(t, o)
	const size = 200
	accepted := 0
	for i := range 1000 {
		_, err := q.Append(payload(i, size))
		if errors.Is(err, ErrFull) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if accepted != i {
			t.Fatalf("record %d accepted after a refusal", i)
		}
		accepted++
	}
	st := q.Stats()
	if st.Refused != uint64(1000-accepted) || st.Dropped != 0 || st.Records != int64(accepted) || st.Bytes > o.MaxBytes {
		t.Fatalf("stats %+v with %d accepted", st, accepted)
	}
	if d := diskBytes(t, dir); d > o.MaxBytes {
		t.Fatalf("%d bytes on disk under Refuse, cap %d", d, o.MaxBytes)
	}
	recs, _ := q.Peek(100, 0)
	checkPayloads(t, recs, 0, size)
	if err := q.Ack(recs[99].Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append(payload(accepted, size)); err != nil {
		t.Fatalf("Append after acking 100: %v", err)
	}
	all := drainAll(t, q, 64)
	if len(all) != accepted-100+1 {
		t.Fatalf("drained %d, want %d", len(all), accepted-100+1)
	}
	checkPayloads(t, all, 100, size)
}

// Records a drainer peeked may be dropped at the cap before it acks
// them: the Ack then removes nothing more and the counts add up.
func TestAckAfterDrop(t *testing.T) {
	o := capOpts(t.TempDir(), DropOldest)
	q := openQ(t, o)
	appendN(t, q, 0, 100, 200)
	peeked, _ := q.Peek(50, 0)
	appendN(t, q, 100, 400, 200) // drops the peeked ones and more
	first, _ := q.Peek(1, 0)
	if first[0].Seq <= peeked[49].Seq {
		t.Fatalf("head at seq %d after the drops; peeked up to %d", first[0].Seq, peeked[49].Seq)
	}
	if err := q.Ack(peeked[49].Seq); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if st.Acked != 0 || int64(st.Dropped)+st.Records != 500 {
		t.Fatalf("stats %+v after acking dropped records", st)
	}
	all := drainAll(t, q, 77)
	if all[0].Seq != first[0].Seq || all[len(all)-1].Seq != 500 {
		t.Fatalf("drained seqs %d..%d", all[0].Seq, all[len(all)-1].Seq)
	}
	checkPayloads(t, all, int(all[0].Seq-1), 200)
}
