package main

// The small application every stack carries: 64-byte messages that name
// their session and sequence number, carry the time they were handed to
// the stack, and fill the rest with bytes derived from both, so a
// corrupted, misdelivered, duplicated or reordered message is caught.

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// msgSize is the payload of every message: 64 bytes, as the issue asks.
const msgSize = 64

// epoch is the clock the messages carry: nanoseconds since the process
// started (monotonic; client and server of a telemetry run share it).
var epoch = time.Now()

func sinceEpoch() int64 { return int64(time.Since(epoch)) }

// fillMessage writes message seq of session into b (msgSize bytes).
func fillMessage(b []byte, session uint32, seq uint64, sent int64) []byte {
	b = b[:msgSize]
	binary.BigEndian.PutUint32(b[0:], 0x75646370) // "udcp"
	binary.BigEndian.PutUint32(b[4:], session)
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint64(b[16:], uint64(sent))
	for i := 24; i < msgSize; i++ {
		b[i] = byte(session) ^ byte(seq) ^ byte(i*7)
	}
	return b
}

// parsedMessage is what a message says.
type parsedMessage struct {
	session uint32
	seq     uint64
	sent    int64
	ok      bool // the right size, magic and filler
}

func parseMessage(b []byte) parsedMessage {
	if len(b) != msgSize || binary.BigEndian.Uint32(b) != 0x75646370 {
		return parsedMessage{}
	}
	m := parsedMessage{
		session: binary.BigEndian.Uint32(b[4:]),
		seq:     binary.BigEndian.Uint64(b[8:]),
		sent:    int64(binary.BigEndian.Uint64(b[16:])),
		ok:      true,
	}
	for i := 24; i < msgSize; i++ {
		if b[i] != byte(m.session)^byte(m.seq)^byte(i*7) {
			m.ok = false
		}
	}
	return m
}

// recorder is the server application's record of one run: per session,
// the next sequence number it expects and the latency of every message.
// Each session's messages arrive on one goroutine at a time, but
// different sessions on different ones (rudp workers, kcp and quic
// per-session goroutines), so each session has its own lock.
type recorder struct {
	sessions []sessionRecord
	received atomic.Int64 // messages, all sessions, good or not
	bad      atomic.Int64 // wrong size or content, or an unknown session
}

type sessionRecord struct {
	mu        sync.Mutex
	next      uint64  // sequence number expected next
	delivered int     // messages that came in order, once
	dups      int     // a sequence number already delivered
	gaps      int     // a sequence number beyond the next: something was skipped
	latencies []int64 // ns, of the messages delivered
}

func newRecorder(sessions int) *recorder {
	return &recorder{sessions: make([]sessionRecord, sessions)}
}

// message records one message that reached the server application at now.
func (r *recorder) message(b []byte, now int64) {
	r.received.Add(1)
	m := parseMessage(b)
	if !m.ok || int(m.session) >= len(r.sessions) {
		r.bad.Add(1)
		return
	}
	s := &r.sessions[m.session]
	s.mu.Lock()
	switch {
	case m.seq == s.next:
		s.next++
		s.delivered++
		s.latencies = append(s.latencies, now-m.sent)
	case m.seq < s.next:
		s.dups++
	default:
		s.gaps++
		s.next = m.seq + 1 // count the rest against the new position
	}
	s.mu.Unlock()
}

// summary is a run's record, all sessions together.
type summary struct {
	delivered, dups, gaps, bad int
	latencies                  []int64 // sorted
}

func (r *recorder) summary() summary {
	var s summary
	for i := range r.sessions {
		rec := &r.sessions[i]
		rec.mu.Lock()
		s.delivered += rec.delivered
		s.dups += rec.dups
		s.gaps += rec.gaps
		s.latencies = append(s.latencies, rec.latencies...)
		rec.mu.Unlock()
	}
	s.bad = int(r.bad.Load())
	slices.Sort(s.latencies)
	return s
}

// delivered is how many messages of session i came in order, once.
func (r *recorder) delivered(i int) int {
	s := &r.sessions[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered
}

// totalDelivered is how many messages of all sessions came in order, once.
func (r *recorder) totalDelivered() int {
	n := 0
	for i := range r.sessions {
		n += r.delivered(i)
	}
	return n
}

// percentile of sorted values, p in [0, 100]; -1 when there are none.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return -1
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
