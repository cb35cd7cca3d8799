package spool

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// One appender and one drainer at once: the drainer sleeps on Wait when
// the queue is empty and gets every record once, in order.
func TestAppenderAndDrainer(t *testing.T) {
	const n, size = 20000, 64
	o := smallOpts(t.TempDir())
	o.Now = nil
	o.Sync = SyncInterval
	q := openQ(t, o)
	got := make(chan []Record, 1)
	go func() {
		var all []Record
		for len(all) < n {
			recs, err := q.Peek(100, 0)
			if err != nil {
				t.Error(err)
				break
			}
			if len(recs) == 0 {
				<-q.Wait()
				continue
			}
			all = append(all, recs...)
			if err := q.Ack(recs[len(recs)-1].Seq); err != nil {
				t.Error(err)
				break
			}
		}
		got <- all
	}()
	go func() {
		for i := range n {
			if _, err := q.Append(payload(i, size)); err != nil {
				t.Error(err)
				return
			}
			if i%1000 == 0 {
				q.Stats() // what /metrics does meanwhile
			}
		}
	}()
	select {
	case all := <-got:
		if len(all) != n {
			t.Fatalf("drainer got %d of %d", len(all), n)
		}
		checkPayloads(t, all, 0, size)
	case <-time.After(2 * time.Minute):
		t.Fatal("drainer did not get every record within two minutes")
	}
	if st := q.Stats(); st.Records != 0 || st.Acked != n || st.Appended != n {
		t.Fatalf("stats %+v", st)
	}
}

// Without SyncAlways the cursor reaches the disk from the background,
// within SyncEvery of an Ack (polled with a generous deadline).
func TestCursorWrittenInBackground(t *testing.T) {
	o := smallOpts(t.TempDir())
	o.SyncEvery = 10 * time.Millisecond
	q := openQ(t, o)
	appendN(t, q, 0, 10, 10)
	if err := q.Ack(7); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(filepath.Join(o.Dir, cursorFile))
		if seq, ok := parseCursor(b); ok && seq == 7 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cursor file %x a minute after Ack(7)", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
