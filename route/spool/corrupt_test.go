package spool

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// corruptOpts: 4 KiB segments of 100-byte records (34 records each).
func corruptOpts(dir string) Options {
	return Options{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 4 << 10, Sync: SyncNever, Now: fakeClock()}
}

const corruptSize = 100 // payload size in the corruption tests

// writeQueue appends n records and closes the queue; it returns the
// segment files, oldest first.
func writeQueue(t *testing.T, o Options, n int) []string {
	t.Helper()
	q, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, q, 0, n, corruptSize)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return segFiles(t, o.Dir)
}

func mutateFile(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o640); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptTail: each way a crash or a bad disk can leave the end of
// the last segment; Open cuts at the last good record, counts it, and
// the queue goes on.
func TestCorruptTail(t *testing.T) {
	const n = 100
	frame := recHeaderSize + corruptSize
	cases := []struct {
		name    string
		mutate  func([]byte) []byte
		kept    int   // records that survive
		cutFrom int64 // bytes cut: from the end of record kept to the end
	}{
		{"truncated mid-record", func(b []byte) []byte { return b[:len(b)-frame/2] }, n - 1, int64(frame - frame/2)},
		{"truncated mid-header", func(b []byte) []byte { return b[:len(b)-frame+10] }, n - 1, 10},
		{"garbage appended", func(b []byte) []byte { return append(b, []byte("not a record at all, just noise")...) }, n, 31},
		{"flipped data byte", func(b []byte) []byte { b[len(b)-5] ^= 0x40; return b }, n - 1, int64(frame)},
		{"flipped length byte", func(b []byte) []byte { b[len(b)-frame+4] ^= 0x01; return b }, n - 1, int64(frame)},
		{"zero-filled tail", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }, n, 4096},
		{"last record zeroed", func(b []byte) []byte { clear(b[len(b)-frame:]); return b }, n - 1, int64(frame)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := corruptOpts(t.TempDir())
			files := writeQueue(t, o, n)
			last := files[len(files)-1]
			mutateFile(t, last, c.mutate)
			q := openQ(t, o)
			st := q.Stats()
			if st.CutTails != 1 || st.CutBytes != c.cutFrom || st.Records != int64(c.kept) {
				t.Fatalf("stats %+v; want 1 cut of %d bytes, %d records", st, c.cutFrom, c.kept)
			}
			if d := diskBytes(t, o.Dir); d != st.DiskBytes {
				t.Fatalf("segment files hold %d bytes after the cut, Stats.DiskBytes %d", d, st.DiskBytes)
			}
			seq, err := q.Append(payload(c.kept, corruptSize))
			if err != nil || seq != uint64(c.kept+1) {
				t.Fatalf("Append after the cut: seq %d, %v; want %d", seq, err, c.kept+1)
			}
			q.Close()
			q = openQ(t, o) // the cut is on disk: nothing more to cut
			if st := q.Stats(); st.CutTails != 0 {
				t.Fatalf("second Open cut again: %+v", st)
			}
			all := drainAll(t, q, 40)
			if len(all) != c.kept+1 {
				t.Fatalf("%d records after the cut and one Append, want %d", len(all), c.kept+1)
			}
			checkPayloads(t, all, 0, corruptSize)
		})
	}
}

// TestCorruptMiddleSegment: a bad record in an older segment cuts the
// rest of that segment only; later segments are kept (seqs skip the gap).
func TestCorruptMiddleSegment(t *testing.T) {
	o := corruptOpts(t.TempDir())
	files := writeQueue(t, o, 150)
	if len(files) < 4 {
		t.Fatalf("%d segments", len(files))
	}
	perSeg := int((o.SegmentBytes - segHeaderSize) / (recHeaderSize + corruptSize))
	frame := recHeaderSize + corruptSize
	// Flip a data byte of the 11th record of the second segment.
	mutateFile(t, files[1], func(b []byte) []byte { b[segHeaderSize+10*frame+30] ^= 0x01; return b })
	q := openQ(t, o)
	st := q.Stats()
	lost := perSeg - 10
	if st.CutTails != 1 || st.CutBytes != int64(lost*frame) || st.Records != int64(150-lost) {
		t.Fatalf("stats %+v; want one cut of %d records (%d bytes)", st, lost, lost*frame)
	}
	all := drainAll(t, q, 1000)
	checkPayloads(t, all[:perSeg+10], 0, corruptSize)
	checkPayloads(t, all[perSeg+10:], 2*perSeg, corruptSize)
	if all[perSeg+10].Seq != uint64(2*perSeg+1) {
		t.Fatalf("the third segment starts at seq %d, want %d", all[perSeg+10].Seq, 2*perSeg+1)
	}
}

// A segment whose header is not ours is removed whole, counted.
func TestCorruptSegmentHeader(t *testing.T) {
	o := corruptOpts(t.TempDir())
	files := writeQueue(t, o, 100)
	size := fileSize(t, files[0])
	mutateFile(t, files[0], func(b []byte) []byte { b[0] = 'X'; return b })
	q := openQ(t, o)
	st := q.Stats()
	if st.CutTails != 1 || st.CutBytes != size {
		t.Fatalf("stats %+v; want the first segment (%d bytes) cut", st, size)
	}
	all := drainAll(t, q, 1000)
	perSeg := int((o.SegmentBytes - segHeaderSize) / (recHeaderSize + corruptSize))
	checkPayloads(t, all, perSeg, corruptSize)
	if len(all) != 100-perSeg {
		t.Fatalf("%d records left, want %d", len(all), 100-perSeg)
	}
}

// A cursor file that is not whole costs redelivery, never records.
func TestCorruptCursor(t *testing.T) {
	o := corruptOpts(t.TempDir())
	q, _ := Open(o)
	appendN(t, q, 0, 50, corruptSize)
	q.Ack(20)
	q.Close()
	mutateFile(t, filepath.Join(o.Dir, cursorFile), func(b []byte) []byte { b[9] ^= 0xff; return b })
	q = openQ(t, o)
	all := drainAll(t, q, 100)
	if len(all) != 50 {
		t.Fatalf("%d records after a bad cursor, want all 50 again", len(all))
	}
	checkPayloads(t, all, 0, corruptSize)
}

// FuzzOpen opens a queue whose only segment and cursor hold arbitrary
// bytes: Open never fails or panics, every record it returns is a whole
// record of the input with a matching CRC, the first after the cursor,
// and the queue works afterwards.
func FuzzOpen(f *testing.F) {
	seedDir := f.TempDir()
	q, _ := Open(corruptOpts(seedDir))
	for i := range 5 {
		q.Append(payload(i, 10*i))
	}
	q.Ack(2)
	q.Close()
	valid, _ := os.ReadFile(segFiles(f, seedDir)[0])
	cursor, _ := os.ReadFile(filepath.Join(seedDir, cursorFile))
	f.Add(valid, []byte{})
	f.Add(valid, cursor)
	f.Add(valid[:len(valid)-7], cursor)
	f.Add(append(bytes.Clone(valid), make([]byte, 64)...), []byte{})
	f.Add(valid[:segHeaderSize], cursor)
	f.Add([]byte{}, []byte{})
	f.Add(make([]byte, 200), make([]byte, cursorSize))
	flipped := bytes.Clone(valid)
	flipped[len(flipped)-3] ^= 1
	f.Add(flipped, []byte{})
	huge := make([]byte, cursorSize) // the last seq there is: read as no cursor
	putCursor(huge, 1<<64-1)
	f.Add(valid, huge)
	f.Fuzz(fuzzOpen)
}

func fuzzOpen(t *testing.T, seg, cursor []byte) {
	o := corruptOpts(t.TempDir())
	o.SegmentBytes = 64 << 10
	if err := os.WriteFile(filepath.Join(o.Dir, segName(1)), seg, 0o640); err != nil {
		t.Fatal(err)
	}
	if len(cursor) > 0 {
		if err := os.WriteFile(filepath.Join(o.Dir, cursorFile), cursor, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	acked, _ := parseCursor(cursor)
	if acked >= 1<<63 {
		acked = 0
	}
	q, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	recs, err := q.Peek(1<<20, 0)
	if err != nil {
		t.Fatalf("Peek: %v", err)
	}
	off := segHeaderSize
	for seq := uint64(1); len(recs) > 0 && seq < recs[0].Seq; seq++ { // the acked ones
		if off+recHeaderSize > len(seg) {
			t.Fatalf("first record seq %d past the input's end", recs[0].Seq)
		}
		off += recHeaderSize + int(binary.LittleEndian.Uint32(seg[off+4:]))
	}
	for i, r := range recs {
		frame := make([]byte, recHeaderSize+len(r.Data))
		copy(frame[recHeaderSize:], r.Data)
		putRecHeader(frame, r.Seq, r.Time.UnixNano(), r.Data)
		if r.Seq <= acked || (i > 0 && r.Seq != recs[i-1].Seq+1) ||
			off+len(frame) > len(seg) || !bytes.Equal(seg[off:off+len(frame)], frame) {
			t.Fatalf("record %d (seq %d, cursor %d) is not the input's record at %d", i, r.Seq, acked, off)
		}
		off += len(frame)
	}
	seq, err := q.Append([]byte("after"))
	if err != nil || seq <= acked || (len(recs) > 0 && seq != recs[len(recs)-1].Seq+1) {
		t.Fatalf("Append: seq %d, %v after %d records, cursor %d", seq, err, len(recs), acked)
	}
	q.Close()
	q = openQ(t, o)
	if st := q.Stats(); st.Records != int64(len(recs)+1) || st.CutTails != 0 {
		t.Fatalf("reopen: %+v, want %d records and no cut", st, len(recs)+1)
	}
}

// A record that goes bad under a running queue (the disk changed after
// Open verified it) does not stop the drainer: the queue rescans its
// directory as Open does, cuts that record and the rest of its segment,
// counts it, and goes on; in the tail too, where the next Append rolls.
func TestCorruptAfterOpen(t *testing.T) {
	o := corruptOpts(t.TempDir())
	q := openQ(t, o)
	appendN(t, q, 0, 150, corruptSize)
	files := segFiles(t, o.Dir)
	perSeg := int((o.SegmentBytes - segHeaderSize) / (recHeaderSize + corruptSize))
	frame := recHeaderSize + corruptSize
	if err := q.Ack(5); err != nil {
		t.Fatal(err)
	}
	// The 11th record of the second segment, and the last of the tail.
	mutateFile(t, files[1], func(b []byte) []byte { b[segHeaderSize+10*frame+30] ^= 0x01; return b })
	mutateFile(t, files[len(files)-1], func(b []byte) []byte { b[len(b)-2] ^= 0x01; return b })
	all := drainAll(t, q, 1000)
	st := q.Stats()
	lost := perSeg - 10 + 1
	if st.CutTails != 2 || st.CutBytes != int64(lost*frame) || len(all) != 145-lost {
		t.Fatalf("stats %+v, %d records; want two cuts of %d records in all", st, len(all), lost)
	}
	checkPayloads(t, all[:perSeg+10-5], 5, corruptSize)
	checkPayloads(t, all[perSeg+10-5:], 2*perSeg, corruptSize)
	seq, err := q.Append(payload(150, corruptSize))
	if err != nil || seq != 151 {
		t.Fatalf("Append after the cut tail: seq %d, %v; want 151 (no seq handed out twice)", seq, err)
	}
	q.Close()
	q = openQ(t, o)
	if st := q.Stats(); st.CutTails != 0 || st.Records != 1 {
		t.Fatalf("reopen: %+v; want no cut and the one record", st)
	}
}
