package poll

import (
	"strconv"
	"time"
)

// Quality says how far a published value can be trusted.
type Quality uint8

// The qualities.
const (
	Good  Quality = iota + 1 // read by this poll
	Stale                    // this poll failed; the value and ts are the last good read's
	Bad                      // no value: never read, or the device refused the read
)

func (q Quality) String() string {
	switch q {
	case Good:
		return "good"
	case Stale:
		return "stale"
	}
	return "bad"
}

// Sample is one tag's outcome of one poll.
type Sample struct {
	Q   Quality
	V   Value     // Good and Stale
	TS  time.Time // when the value was read (Stale: its last good read)
	Err string    // Stale and Bad: why this poll has no value
}

// AppendPayload appends the bus payload of s:
// {"v":1.5,"q":"good","ts":1767225600123}, ts in Unix milliseconds;
// Bad has "v":null (a missing value is never a zero) and Stale and Bad
// say why in "err".
func (s Sample) AppendPayload(dst []byte) []byte {
	dst = append(dst, `{"v":`...)
	if s.Q == Bad {
		dst = append(dst, "null"...)
	} else {
		dst = s.V.AppendJSON(dst)
	}
	dst = append(dst, `,"q":"`...)
	dst = append(dst, s.Q.String()...)
	dst = append(dst, `","ts":`...)
	dst = strconv.AppendInt(dst, s.TS.UnixMilli(), 10)
	if s.Err != "" {
		dst = append(dst, `,"err":`...)
		dst = Value{Kind: KindString, S: s.Err}.AppendJSON(dst)
	}
	return append(dst, '}')
}

// tagState is what the poller remembers of a tag between polls.
type tagState struct {
	published bool
	last      Sample // last published
	good      Sample // last good read, Q == 0 before the first
}

// next turns a poll's outcome into the tag's sample. A failed poll
// (why not "") keeps the last good value as Stale, or is Bad without
// one; a refusal (the device's exception, a value that does not decode)
// is Bad at once: the old value is no longer the device's.
func (s *tagState) next(v Value, now time.Time, why string, refused bool) Sample {
	switch {
	case why == "":
		s.good = Sample{Q: Good, V: v, TS: now}
		return s.good
	case s.good.Q == Good && !refused:
		return Sample{Q: Stale, V: s.good.V, TS: s.good.TS, Err: why}
	}
	s.good = Sample{}
	return Sample{Q: Bad, TS: now, Err: why}
}

// publish reports whether sample goes on the bus: always when every
// poll publishes; on change otherwise: the first sample, a change of
// quality, or a good value beyond deadband of the last published one.
// Stale samples repeat the same value: on change they go once.
func (s *tagState) publish(sample Sample, onChange bool, deadband float64) bool {
	send := !onChange || !s.published || sample.Q != s.last.Q ||
		sample.Q == Good && !sample.V.Within(s.last.V, deadband)
	if send {
		s.published, s.last = true, sample
	}
	return send
}
