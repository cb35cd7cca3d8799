package spool

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// openQ opens a queue and closes it when the test ends (if the test did
// not already).
func openQ(t testing.TB, o Options) *Queue {
	t.Helper()
	q, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return q
}

// payload is record i's data: its number, padded to n bytes.
func payload(i, n int) []byte {
	b := []byte(fmt.Sprintf("record-%06d|", i))
	for len(b) < n {
		b = append(b, byte('a'+i%26))
	}
	return b[:max(n, len(b))]
}

// fakeClock is a Now that moves one millisecond per call.
func fakeClock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		t = t.Add(time.Millisecond)
		return t
	}
}

// appendN appends payload(from..from+n-1, size) and returns their seqs.
func appendN(t testing.TB, q *Queue, from, n, size int) []uint64 {
	t.Helper()
	seqs := make([]uint64, 0, n)
	for i := from; i < from+n; i++ {
		seq, err := q.Append(payload(i, size))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// drainAll peeks and acks in batches until the queue is empty and
// returns every record seen.
func drainAll(t testing.TB, q *Queue, batch int) []Record {
	t.Helper()
	var all []Record
	for {
		recs, err := q.Peek(batch, 0)
		if err != nil {
			t.Fatalf("Peek: %v", err)
		}
		if len(recs) == 0 {
			return all
		}
		all = append(all, recs...)
		if err := q.Ack(recs[len(recs)-1].Seq); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
}

// checkPayloads checks that recs are payload(first..) in order with
// consecutive seqs.
func checkPayloads(t testing.TB, recs []Record, first, size int) {
	t.Helper()
	for i, r := range recs {
		if want := payload(first+i, size); !bytes.Equal(r.Data, want) {
			t.Fatalf("record %d (seq %d): data %q, want %q", i, r.Seq, r.Data, want)
		}
		if i > 0 && r.Seq != recs[i-1].Seq+1 {
			t.Fatalf("record %d: seq %d after %d", i, r.Seq, recs[i-1].Seq)
		}
	}
}

// segFiles lists the segment files in dir, oldest first.
func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// diskBytes sums the sizes of the segment files in dir.
func diskBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	for _, p := range segFiles(t, dir) {
		n += fileSize(t, p)
	}
	return n
}
