package spool

import (
	"bytes"
	"testing"
)

// peekTail is what PeekAfter(after, max, maxBytes) should return: Peek's
// records after seq after, cut by max and maxBytes as Peek cuts. It calls
// Peek, which forgets the read position: call it after the PeekAfter
// under test.
func peekTail(t *testing.T, q *Queue, after uint64, max, maxBytes int) []Record {
	t.Helper()
	all, err := q.Peek(1<<30, 0)
	if err != nil {
		t.Fatalf("Peek: %v", err)
	}
	var out []Record
	total := 0
	for _, r := range all {
		if r.Seq <= after {
			continue
		}
		if len(out) == max || (len(out) > 0 && maxBytes > 0 && total+len(r.Data) > maxBytes) {
			break
		}
		out = append(out, r)
		total += len(r.Data)
	}
	return out
}

func sameRecords(t *testing.T, what string, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || !got[i].Time.Equal(want[i].Time) || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("%s: record %d is seq %d, want seq %d (or its time or data differ)", what, i, got[i].Seq, want[i].Seq)
		}
	}
}

// A drainer's walk: PeekAfter the last seq returned, in batches of
// varying size and byte limits, across segments, with Acks in between
// and now and then another after (a read from the head). Every result is
// what the queue holds (payload(seq-1)) after that seq.
func TestPeekAfterWalk(t *testing.T) {
	q := openQ(t, smallOpts(t.TempDir()))
	const n, size = 500, 200 // 73 records a segment
	appendN(t, q, 0, n, size)
	after, acked := uint64(0), uint64(0)
	for round := 0; after < n; round++ {
		max, maxBytes := 1+round*7%97, 0
		if round%3 == 1 {
			maxBytes = 10 * size
		}
		from := after
		if round%5 == 4 && after > acked+2 {
			from = after - 2 // not where the last one stopped
		}
		got, err := q.PeekAfter(from, max, maxBytes)
		if err != nil {
			t.Fatalf("round %d: PeekAfter(%d): %v", round, from, err)
		}
		want := min(max, n-int(from))
		if maxBytes > 0 {
			want = min(want, maxBytes/size)
		}
		if len(got) != want {
			t.Fatalf("round %d: PeekAfter(%d, %d, %d): %d records, want %d", round, from, max, maxBytes, len(got), want)
		}
		if got[0].Seq != from+1 {
			t.Fatalf("round %d: PeekAfter(%d) starts at seq %d", round, from, got[0].Seq)
		}
		checkPayloads(t, got, int(from), size)
		after = got[len(got)-1].Seq
		if round%2 == 1 && after > acked+3 {
			acked = after - 3
			if err := q.Ack(acked); err != nil {
				t.Fatal(err)
			}
		}
	}
	if recs, err := q.PeekAfter(n, 10, 0); err != nil || len(recs) != 0 {
		t.Fatalf("PeekAfter(last seq): %d records, %v; want none", len(recs), err)
	}
	if err := q.Ack(n); err != nil || q.Stats().Records != 0 {
		t.Fatalf("Ack of all: %v, %+v", err, q.Stats())
	}
}

// PeekAfter goes on from where the last one stopped: it does not read
// the records it returned before again (a bad one among them is not
// seen), but a PeekAfter from elsewhere reads from the head, finds it,
// and cuts as Peek does.
func TestPeekAfterResumesWithoutRereading(t *testing.T) {
	o := corruptOpts(t.TempDir())
	q := openQ(t, o)
	appendN(t, q, 0, 100, corruptSize) // 34 records a segment
	if _, err := q.PeekAfter(0, 20, 0); err != nil {
		t.Fatal(err)
	}
	frame := recHeaderSize + corruptSize
	files := segFiles(t, o.Dir)
	mutateFile(t, files[0], func(b []byte) []byte { b[segHeaderSize+5*frame+30] ^= 0x01; return b })
	got, err := q.PeekAfter(20, 30, 0)
	if err != nil || q.Stats().CutTails != 0 {
		t.Fatalf("resumed PeekAfter: %v, %+v; want no rescan", err, q.Stats())
	}
	checkPayloads(t, got, 20, corruptSize)
	if len(got) != 30 || got[0].Seq != 21 {
		t.Fatalf("resumed PeekAfter: %d records from seq %d", len(got), got[0].Seq)
	}
	got, err = q.PeekAfter(10, 30, 0) // from the head: seq 6 is bad
	if err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.CutTails != 1 {
		t.Fatalf("PeekAfter from the head: %+v; want the bad record's segment cut", st)
	}
	sameRecords(t, "after the cut", got, peekTail(t, q, 10, 30, 0))
	perSeg := uint64((o.SegmentBytes - segHeaderSize) / int64(frame))
	if got[0].Seq != perSeg+1 { // seqs 6.. were cut with the rest of the first segment
		t.Fatalf("after the cut: first seq %d, want %d", got[0].Seq, perSeg+1)
	}
}

// After drop-oldest removed the segment the last PeekAfter stopped in,
// PeekAfter returns the tail of what is left.
func TestPeekAfterDropOldest(t *testing.T) {
	q := openQ(t, capOpts(t.TempDir(), DropOldest))
	appendN(t, q, 0, 250, 200)
	if _, err := q.PeekAfter(0, 100, 0); err != nil {
		t.Fatal(err)
	}
	appendN(t, q, 250, 200, 200)
	if q.Stats().Dropped <= 100 {
		t.Fatalf("%+v: want more than the peeked records dropped", q.Stats())
	}
	got, err := q.PeekAfter(100, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "after drop-oldest", got, peekTail(t, q, 100, 50, 0))
	if got[0].Seq != 1+q.Stats().Dropped {
		t.Fatalf("first seq %d, want the head %d", got[0].Seq, 1+q.Stats().Dropped)
	}
	// A drop that leaves the segment: the head moved, the position holds.
	last := got[len(got)-1].Seq
	appendN(t, q, 450, 5, 200)
	got, err = q.PeekAfter(last, 40, 3000)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "after a small drop", got, peekTail(t, q, last, 40, 3000))
}

// A record that went bad past the read position: PeekAfter rescans, cuts
// it and the rest of its segment, and returns the tail of what is left.
func TestPeekAfterCorruptAhead(t *testing.T) {
	o := corruptOpts(t.TempDir())
	q := openQ(t, o)
	appendN(t, q, 0, 150, corruptSize)
	if _, err := q.PeekAfter(0, 20, 0); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(15); err != nil {
		t.Fatal(err)
	}
	frame := recHeaderSize + corruptSize
	files := segFiles(t, o.Dir)
	mutateFile(t, files[1], func(b []byte) []byte { b[segHeaderSize+10*frame+30] ^= 0x01; return b })
	got, err := q.PeekAfter(20, 60, 0)
	if err != nil {
		t.Fatal(err)
	}
	if q.Stats().CutTails != 1 {
		t.Fatalf("%+v: want one cut", q.Stats())
	}
	sameRecords(t, "after the cut", got, peekTail(t, q, 20, 60, 0))
	perSeg := uint64((o.SegmentBytes - segHeaderSize) / int64(frame))
	bad := perSeg + 11 // the rest of its segment goes with it
	if k := bad - 21; got[0].Seq != 21 || got[k-1].Seq != bad-1 || got[k].Seq != 2*perSeg+1 {
		t.Fatalf("seqs %d, %d, %d; want 21, %d, then %d", got[0].Seq, got[k-1].Seq, got[k].Seq, bad-1, 2*perSeg+1)
	}
}
