package spool

import (
	"bytes"
	"testing"
)

// TestAckWithoutPeekWalksHeaders acks records no Peek returned (a sink
// acks the messages it published live without reading them back): the
// head walks their headers a chunk at a time, across segments and past
// records larger than the read buffer, and lands on the right record with
// the right age. Peek, Stats and a reopen agree with it.
func TestAckWithoutPeekWalksHeaders(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, MaxBytes: 4 << 20, SegmentBytes: 1 << 20, Sync: SyncNever, Now: fakeClock()}
	q := openQ(t, o)
	size := func(i int) int { // mostly small; every 97th larger than the 64 KiB read buffer
		if i%97 == 96 {
			return 100 << 10
		}
		return 40 + i%200
	}
	var seqs []uint64
	for i := range 3000 {
		seq, err := q.Append(payload(i, size(i)))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		seqs = append(seqs, seq)
	}
	if len(q.segs) < 3 {
		t.Fatalf("%d segments: the test wants the walk to cross segments", len(q.segs))
	}
	// Ack at points inside chunks, at segment ends and at big records.
	for _, upTo := range []int{0, 1, 95, 96, 97, 700, 1500, 2998} {
		if err := q.Ack(seqs[upTo]); err != nil {
			t.Fatalf("Ack %d: %v", upTo, err)
		}
		st := q.Stats()
		if want := int64(len(seqs) - upTo - 1); st.Records != want {
			t.Fatalf("after Ack %d: %d records, want %d", upTo, st.Records, want)
		}
		recs, err := q.Peek(1, 0)
		if err != nil || len(recs) != 1 {
			t.Fatalf("Peek after Ack %d: %v %v", upTo, recs, err)
		}
		if recs[0].Seq != seqs[upTo+1] || !bytes.Equal(recs[0].Data, payload(upTo+1, size(upTo+1))) {
			t.Fatalf("after Ack %d the head is seq %d (%q...), want %d", upTo, recs[0].Seq, recs[0].Data[:14], seqs[upTo+1])
		}
		if !st.Oldest.Equal(recs[0].Time) {
			t.Fatalf("after Ack %d: Oldest %v, the head record's time %v", upTo, st.Oldest, recs[0].Time)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q2 := openQ(t, Options{Dir: dir, MaxBytes: 4 << 20, SegmentBytes: 1 << 20, Sync: SyncNever})
	recs, err := q2.Peek(10, 0)
	if err != nil || len(recs) != 1 || recs[0].Seq != seqs[2999] {
		t.Fatalf("after reopen: %v %v, want only seq %d", recs, err, seqs[2999])
	}
}

// TestAckByMarksSetsHead: acking part of what a Peek returned makes the
// next peeked record the head without reading it again, and the head is
// right: its age in Stats, what Peek and a drop at the cap see next.
func TestAckByMarksSetsHead(t *testing.T) {
	q := openQ(t, Options{Dir: t.TempDir(), MaxBytes: 1 << 20, SegmentBytes: 64 << 10, Sync: SyncNever, Now: fakeClock()})
	seqs := appendN(t, q, 0, 2000, 100) // several segments
	recs, err := q.Peek(1500, 0)
	if err != nil || len(recs) != 1500 {
		t.Fatalf("Peek: %d records, %v", len(recs), err)
	}
	for _, k := range []int{10, 11, 700, 1400} {
		if err := q.Ack(seqs[k]); err != nil {
			t.Fatal(err)
		}
		if st := q.Stats(); !st.Oldest.Equal(recs[k+1].Time) || st.Records != int64(2000-k-1) {
			t.Fatalf("after Ack %d: oldest %v records %d, want %v and %d", k, st.Oldest, st.Records, recs[k+1].Time, 2000-k-1)
		}
	}
	next, err := q.PeekAfter(seqs[1499], 1, 0)
	if err != nil || len(next) != 1 || next[0].Seq != seqs[1500] {
		t.Fatalf("PeekAfter the peeked: %v %v", next, err)
	}
	again, err := q.Peek(1, 0)
	if err != nil || len(again) != 1 || again[0].Seq != seqs[1401] || !bytes.Equal(again[0].Data, payload(1401, 100)) {
		t.Fatalf("Peek from the head: %v %v, want seq %d", again, err, seqs[1401])
	}
}
