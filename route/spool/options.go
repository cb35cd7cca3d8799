package spool

import (
	"errors"
	"fmt"
	"time"
)

// Policy says what Append does when the queue is at its byte cap.
type Policy uint8

const (
	// DropOldest drops whole records from the head until the new one
	// fits; each dropped record is counted in Stats.Dropped.
	DropOldest Policy = iota
	// Refuse leaves the queue as it is and returns ErrFull; each refusal
	// is counted in Stats.Refused.
	Refuse
)

// ParsePolicy reads a policy as configuration spells it: "oldest" (the
// default, also "") or "refuse".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "", "oldest":
		return DropOldest, nil
	case "refuse":
		return Refuse, nil
	}
	return 0, fmt.Errorf("spool: policy %q: want oldest or refuse", s)
}

func (p Policy) String() string {
	switch p {
	case DropOldest:
		return "oldest"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// SyncPolicy says when appended records are fsynced.
type SyncPolicy uint8

const (
	// SyncInterval fsyncs at most SyncEvery after an Append: on the next
	// Append past it, or from a background goroutine when none comes.
	SyncInterval SyncPolicy = iota
	// SyncAlways fsyncs before Append returns (and writes the cursor
	// before Ack returns).
	SyncAlways
	// SyncNever leaves write-back to the kernel, except at Close.
	SyncNever
)

// ParseSync reads a sync policy as configuration spells it: "interval"
// (the default, also ""), "always" or "never".
func ParseSync(s string) (SyncPolicy, error) {
	switch s {
	case "", "interval":
		return SyncInterval, nil
	case "always":
		return SyncAlways, nil
	case "never":
		return SyncNever, nil
	}
	return 0, fmt.Errorf("spool: sync %q: want interval, always or never", s)
}

func (s SyncPolicy) String() string {
	switch s {
	case SyncInterval:
		return "interval"
	case SyncAlways:
		return "always"
	case SyncNever:
		return "never"
	}
	return fmt.Sprintf("SyncPolicy(%d)", uint8(s))
}

// Defaults and hard limits.
const (
	DefaultMaxBytes     int64 = 256 << 20
	DefaultSegmentBytes int64 = 8 << 20
	DefaultMaxRecord          = 1 << 20
	DefaultSyncEvery          = 100 * time.Millisecond
	// HardMaxRecord bounds MaxRecord, and the length Open believes in a
	// record header, so that a length never overflows an int on 32-bit.
	HardMaxRecord = 1 << 30
)

// Options configure a Queue. The zero value of every field but Dir means
// its default.
type Options struct {
	Dir          string        // one directory per queue, created if missing
	MaxBytes     int64         // cap on the bytes in use on disk (default 256 MiB)
	SegmentBytes int64         // segment file size (default 8 MiB, at most MaxBytes/4)
	MaxRecord    int           // bytes per record (default 1 MiB, or what a segment holds)
	Policy       Policy        // what Append does at the cap
	Sync         SyncPolicy    // when records are fsynced
	SyncEvery    time.Duration // the SyncInterval window (default 100 ms)
	Now          func() time.Time
}

// withDefaults fills the zero fields and checks that the sizes fit each
// other: a record must fit in a segment, and four segments in the cap.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("spool: Options.Dir is empty")
	}
	if o.MaxBytes < 0 || o.SegmentBytes < 0 || o.MaxRecord < 0 || o.SyncEvery < 0 {
		return o, errors.New("spool: negative size or interval in Options")
	}
	if o.Policy > Refuse {
		return o, fmt.Errorf("spool: unknown policy %d", o.Policy)
	}
	if o.Sync > SyncNever {
		return o, fmt.Errorf("spool: unknown sync policy %d", o.Sync)
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = min(DefaultSegmentBytes, o.MaxBytes/4)
	}
	if o.SegmentBytes > o.MaxBytes/4 {
		return o, fmt.Errorf("spool: SegmentBytes %d is more than MaxBytes/4 (%d)", o.SegmentBytes, o.MaxBytes/4)
	}
	room := o.SegmentBytes - segHeaderSize - recHeaderSize // the largest record a segment holds
	if o.MaxRecord == 0 {
		o.MaxRecord = int(min(int64(DefaultMaxRecord), room))
	}
	if room < 1 || o.MaxRecord < 1 {
		return o, fmt.Errorf("spool: MaxBytes %d leaves segments too small for any record", o.MaxBytes)
	}
	if int64(o.MaxRecord) > room || o.MaxRecord > HardMaxRecord {
		return o, fmt.Errorf("spool: MaxRecord %d does not fit a segment of %d bytes (at most %d)", o.MaxRecord, o.SegmentBytes, min(room, HardMaxRecord))
	}
	if o.SyncEvery == 0 {
		o.SyncEvery = DefaultSyncEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}
