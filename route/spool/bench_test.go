package spool

import (
	"testing"
	"time"
)

// Append of a 256-byte record allocates nothing once the write buffer
// has grown, under every sync policy.
func TestAppendDoesNotAllocate(t *testing.T) {
	for _, s := range []SyncPolicy{SyncNever, SyncInterval, SyncAlways} {
		q := openQ(t, Options{Dir: t.TempDir(), Sync: s})
		data := make([]byte, 256)
		q.Append(data)
		if n := testing.AllocsPerRun(200, func() { q.Append(data) }); n != 0 {
			t.Errorf("sync %v: Append allocates %.1f times", s, n)
		}
	}
}

// BenchmarkAppend appends 256-byte records under each sync policy into
// the default 256 MiB queue (it reports records/s; -benchmem allocs/op).
func BenchmarkAppend(b *testing.B) {
	for _, s := range []SyncPolicy{SyncNever, SyncInterval, SyncAlways} {
		b.Run(s.String(), func(b *testing.B) {
			q := openQ(b, Options{Dir: b.TempDir(), Sync: s})
			data := make([]byte, 256)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if _, err := q.Append(data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkAppendBatch appends 256-byte records in batches of 64 (what
// a sink's forward goroutine hands over at once under load); per record.
func BenchmarkAppendBatch(b *testing.B) {
	for _, s := range []SyncPolicy{SyncNever, SyncInterval, SyncAlways} {
		b.Run(s.String(), func(b *testing.B) {
			q := openQ(b, Options{Dir: b.TempDir(), Sync: s})
			batch := make([][]byte, 64)
			for i := range batch {
				batch[i] = make([]byte, 256)
			}
			b.SetBytes(256)
			b.ReportAllocs()
			start := time.Now()
			for i := 0; i < b.N; i += len(batch) {
				if _, _, err := q.AppendBatch(batch[:min(len(batch), b.N-i)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkDrain peeks batches of 256 records and acks each batch, from
// a queue of 256-byte records filled beforehand; with SyncAlways each Ack
// writes the cursor file with two fsyncs (the file's and the directory's).
func BenchmarkDrain(b *testing.B) {
	for _, s := range []SyncPolicy{SyncNever, SyncAlways} {
		b.Run(s.String(), func(b *testing.B) { benchDrain(b, s) })
	}
}

func benchDrain(b *testing.B, s SyncPolicy) {
	o := Options{Dir: b.TempDir(), MaxBytes: 1 << 30, Sync: SyncNever}
	fill, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 256)
	for range b.N {
		if _, err := fill.Append(data); err != nil {
			b.Fatal(err)
		}
	}
	fill.Close()
	o.Sync = s
	q := openQ(b, o)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	got := 0
	for got < b.N {
		recs, err := q.Peek(256, 0)
		if err != nil || len(recs) == 0 {
			b.Fatalf("Peek after %d of %d: %d records, %v", got, b.N, len(recs), err)
		}
		if err := q.Ack(recs[len(recs)-1].Seq); err != nil {
			b.Fatal(err)
		}
		got += len(recs)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkOpen64MiB opens (scans and checks) a queue holding 64 MiB of
// 256-byte records, from the page cache: the CPU side of recovery; from a
// cold disk Open reads the queue once at the disk's speed.
func BenchmarkOpen64MiB(b *testing.B) {
	o := Options{Dir: b.TempDir(), Sync: SyncNever}
	q, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 256)
	for q.Stats().Bytes < 64<<20 {
		q.Append(data)
	}
	want := q.Stats().Records
	q.Close()
	b.SetBytes(64 << 20)
	b.ResetTimer()
	for b.Loop() {
		q, err := Open(o)
		if err != nil || q.Stats().Records != want {
			b.Fatalf("Open: %v", err)
		}
		q.Close()
	}
}
