package spool

import (
	"testing"
	"time"
)

// steppingClock is a Now that moves step per call.
func steppingClock(step time.Duration) func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

// The sync policies, by the fsyncs they make: always one per Append;
// never none; interval one per Append that comes SyncEvery (by the Now
// clock) after the last fsync. The background tick is an hour away here.
func TestSyncPolicies(t *testing.T) {
	cases := []struct {
		sync  SyncPolicy
		syncs uint64
	}{
		{SyncAlways, 100},
		{SyncNever, 0},
		{SyncInterval, 10}, // the clock moves 1 min per Append, SyncEvery is 10 min
	}
	for _, c := range cases {
		q := openQ(t, Options{Dir: t.TempDir(), Sync: c.sync, SyncEvery: 10 * time.Minute, Now: steppingClock(time.Minute)})
		appendN(t, q, 0, 100, 50)
		if st := q.Stats(); st.Syncs != c.syncs {
			t.Errorf("sync %v: %d fsyncs for 100 Appends, want %d", c.sync, st.Syncs, c.syncs)
		}
	}
}

// With SyncInterval and no Append after, the background tick fsyncs what
// was appended (polled with a generous deadline).
func TestSyncIntervalInBackground(t *testing.T) {
	frozen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := openQ(t, Options{Dir: t.TempDir(), SyncEvery: 10 * time.Millisecond, Now: func() time.Time { return frozen }})
	q.Append([]byte("one"))
	if n := q.Stats().Syncs; n != 0 {
		t.Fatalf("%d fsyncs by the Append itself on a frozen clock", n)
	}
	deadline := time.Now().Add(time.Minute)
	for q.Stats().Syncs == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no background fsync a minute after an Append")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
