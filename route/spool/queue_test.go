package spool

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// smallOpts gives 16 KiB segments, so a few hundred records cross several.
func smallOpts(dir string) Options {
	return Options{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 16 << 10, Now: fakeClock()}
}

func TestRoundTripAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, smallOpts(dir))
	seqs := appendN(t, q, 0, 500, 200)
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("seq %d = %d, want %d", i, s, i+1)
		}
	}
	if n := len(segFiles(t, dir)); n < 5 {
		t.Fatalf("%d segment files for 500 x 200 B in 16 KiB segments", n)
	}
	st := q.Stats()
	if st.Records != 500 || st.Appended != 500 || st.DiskBytes != diskBytes(t, dir) {
		t.Fatalf("stats %+v; disk %d", st, diskBytes(t, dir))
	}
	// Peek without Ack returns the same records again.
	a, _ := q.Peek(7, 0)
	b, _ := q.Peek(7, 0)
	if len(a) != 7 || a[0].Seq != 1 || b[6].Seq != 7 || !bytes.Equal(a[3].Data, b[3].Data) {
		t.Fatalf("two Peeks differ: %v %v", a, b)
	}
	all := drainAll(t, q, 33) // batches that straddle segment ends
	if len(all) != 500 {
		t.Fatalf("drained %d records, want 500", len(all))
	}
	checkPayloads(t, all, 0, 200)
	if files := segFiles(t, dir); len(files) != 1 {
		t.Fatalf("after draining all: %d segment files, want the tail only", len(files))
	}
	st = q.Stats()
	if st.Records != 0 || st.Acked != 500 || !st.Oldest.IsZero() || st.DiskBytes != diskBytes(t, dir) {
		t.Fatalf("stats after drain %+v", st)
	}
}

func TestPeekMaxBytes(t *testing.T) {
	q := openQ(t, smallOpts(t.TempDir()))
	appendN(t, q, 0, 10, 100)
	recs, err := q.Peek(10, 350)
	if err != nil || len(recs) != 3 {
		t.Fatalf("Peek(10, 350) of 100 B records: %d records, %v; want 3", len(recs), err)
	}
	recs, _ = q.Peek(10, 50) // one record even when it alone passes maxBytes
	if len(recs) != 1 {
		t.Fatalf("Peek(10, 50): %d records, want 1", len(recs))
	}
}

// Ack of a seq in the middle of what was peeked, and of seqs never
// peeked, moves the head record by record.
func TestAckPartialAndUnpeeked(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, smallOpts(dir))
	appendN(t, q, 0, 300, 150)
	recs, _ := q.Peek(50, 0)
	if err := q.Ack(recs[19].Seq); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(5); err != nil { // already done: nothing happens
		t.Fatal(err)
	}
	if err := q.Ack(250); err != nil { // past what was peeked, across segments
		t.Fatal(err)
	}
	rest := drainAll(t, q, 1000)
	if len(rest) != 50 || rest[0].Seq != 251 {
		t.Fatalf("after Ack(20), Ack(250): %d records from seq %d", len(rest), rest[0].Seq)
	}
	checkPayloads(t, rest, 250, 150)
	if err := q.Ack(301); !errors.Is(err, ErrAckAhead) {
		t.Fatalf("Ack(301) after 300 appends: %v, want ErrAckAhead", err)
	}
}

func TestRestartKeepsUnacked(t *testing.T) {
	dir := t.TempDir()
	o := smallOpts(dir)
	q, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, q, 0, 400, 120)
	before, _ := q.Peek(400, 0)
	if err := q.Ack(150); err != nil {
		t.Fatal(err)
	}
	filesBefore := len(segFiles(t, dir))
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}

	q = openQ(t, o)
	st := q.Stats()
	if st.Records != 250 || st.CutTails != 0 || !st.Oldest.Equal(before[150].Time) {
		t.Fatalf("after restart: %+v; oldest want %v", st, before[150].Time)
	}
	if n := len(segFiles(t, dir)); n != filesBefore {
		t.Fatalf("segment files %d after restart, %d before", n, filesBefore)
	}
	seq, err := q.Append(payload(400, 120))
	if err != nil || seq != 401 {
		t.Fatalf("Append after restart: seq %d, %v; want 401", seq, err)
	}
	all := drainAll(t, q, 64)
	if len(all) != 251 || all[0].Seq != 151 {
		t.Fatalf("after restart drained %d from seq %d", len(all), all[0].Seq)
	}
	checkPayloads(t, all, 150, 120)
	for i, r := range all[:250] {
		if !r.Time.Equal(before[150+i].Time) {
			t.Fatalf("seq %d: time %v after restart, %v before", r.Seq, r.Time, before[150+i].Time)
		}
	}
}

// Seqs are not handed out twice even when every segment was acked and
// removed before the restart.
func TestSeqsSurviveEmptyRestart(t *testing.T) {
	dir := t.TempDir()
	o := smallOpts(dir)
	q, _ := Open(o)
	appendN(t, q, 0, 300, 200)
	drainAll(t, q, 100)
	q.Close()
	q = openQ(t, o)
	if seq, err := q.Append([]byte("next")); err != nil || seq != 301 {
		t.Fatalf("first Append after an emptied restart: %d, %v; want 301", seq, err)
	}
}

func TestWaitSignalsFirstAppend(t *testing.T) {
	q := openQ(t, smallOpts(t.TempDir()))
	select {
	case <-q.Wait():
		t.Fatal("Wait ready on a new empty queue")
	default:
	}
	done := make(chan []Record)
	go func() {
		<-q.Wait()
		recs, _ := q.Peek(10, 0)
		done <- recs
	}()
	q.Append([]byte("wake"))
	select {
	case recs := <-done:
		if len(recs) != 1 || string(recs[0].Data) != "wake" {
			t.Fatalf("woken drainer got %v", recs)
		}
	case <-time.After(time.Minute):
		t.Fatal("drainer not woken within a minute")
	}
	q.Close()
	if _, ok := <-q.Wait(); ok {
		t.Fatal("Wait not closed by Close")
	}
}

func TestLockedAndTooLarge(t *testing.T) {
	dir := t.TempDir()
	o := smallOpts(dir)
	q := openQ(t, o)
	if _, err := Open(o); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of one dir: %v, want ErrLocked", err)
	}
	max := q.o.MaxRecord
	if _, err := q.Append(make([]byte, max+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Append of MaxRecord+1: %v", err)
	}
	if _, err := q.Append(make([]byte, max)); err != nil {
		t.Fatalf("Append of MaxRecord: %v", err)
	}
	recs, err := q.Peek(1, 0)
	if err != nil || len(recs[0].Data) != max {
		t.Fatalf("Peek of a MaxRecord record: %v", err)
	}
	q.Close()
	q2 := openQ(t, o) // the lock goes with Close
	if q2.Stats().Records != 1 {
		t.Fatal("record lost")
	}
}

func TestOptionsChecked(t *testing.T) {
	dir := t.TempDir()
	bad := []Options{
		{},
		{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 1 << 19},
		{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 1 << 16, MaxRecord: 1 << 16},
		{Dir: dir, MaxBytes: 100},
		{Dir: dir, Policy: 7},
		{Dir: dir, Sync: 9},
		{Dir: dir, SyncEvery: -1},
	}
	for i, o := range bad {
		if q, err := Open(o); err == nil {
			q.Close()
			t.Errorf("case %d: Open(%+v) accepted", i, o)
		}
	}
	o, err := Options{Dir: dir}.withDefaults()
	if err != nil || o.MaxBytes != 256<<20 || o.SegmentBytes != 8<<20 || o.MaxRecord != 1<<20 || o.SyncEvery != 100*time.Millisecond {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	for s, want := range map[string]Policy{"": DropOldest, "oldest": DropOldest, "refuse": Refuse} {
		if p, err := ParsePolicy(s); err != nil || p != want {
			t.Errorf("ParsePolicy(%q) = %v, %v", s, p, err)
		}
	}
	for s, want := range map[string]SyncPolicy{"": SyncInterval, "interval": SyncInterval, "always": SyncAlways, "never": SyncNever} {
		if p, err := ParseSync(s); err != nil || p != want {
			t.Errorf("ParseSync(%q) = %v, %v", s, p, err)
		}
	}
	if _, err := ParsePolicy("newest"); err == nil {
		t.Error("ParsePolicy(newest) accepted")
	}
	if _, err := ParseSync("sometimes"); err == nil {
		t.Error("ParseSync(sometimes) accepted")
	}
}
