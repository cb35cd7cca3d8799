package upstream

import (
	"errors"
	"sync"
	"time"

	"github.com/edgemux/edgemux/protocols/modbus/wire"
)

// Health is a device's state and counters since its line started.
type Health struct {
	Name       string
	Line       string
	Unit       byte
	Requests   uint64        // requests finished (each once, however many attempts)
	OK         uint64        // answered (normal or exception responses)
	Exceptions uint64        // answered with an exception
	Timeouts   uint64        // attempts without a response in time
	CRCErrors  uint64        // attempts answered with a damaged RTU frame
	Stale      uint64        // responses dropped for answering an earlier request
	Failed     uint64        // requests that failed after all attempts
	Refused    uint64        // requests failed at once: demoted, queue full, line closed
	Retries    uint64        // attempts after the first
	LastRTT    time.Duration // of the last answered attempt
	LastAnswer time.Time     // when the device last answered; zero: never
	Failing    bool          // its last request got no answer (timeout, no connection, demoted)
	Demoted    bool
	LastError  string
	// Dial-in devices (a line of KindDialIn) only.
	DialIn    bool
	Connected bool   // its connection is attached now
	Peer      string // the source address of its last connection
	Connects  uint64 // connections attached since start
}

// health is a device's mutable state, guarded by mu: the line's goroutine
// writes it, Health snapshots it for /metrics and /api/stats.
type health struct {
	mu         sync.Mutex
	h          Health
	failsInRow int
	nextProbe  time.Time
}

func (s *health) snapshot() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

// admit says whether a request may go out now: always, unless the device
// is demoted and its next probe is not due.
func (s *health) admit(now time.Time, every time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.h.Demoted || !now.Before(s.nextProbe) {
		if s.h.Demoted {
			s.nextProbe = now.Add(every)
		}
		return true
	}
	s.h.Refused++
	s.h.Requests++
	return false
}

// attemptFailed counts one attempt's failure by kind.
func (s *health) attemptFailed(err error, retry bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case errors.Is(err, wire.ErrCRC):
		s.h.CRCErrors++
	case errors.Is(err, ErrTimeout):
		s.h.Timeouts++
	}
	if retry {
		s.h.Retries++
	}
}

// done records a request's end: an answer promotes the device, a
// failure counts towards demotion.
func (s *health) done(r Result, demoteAfter int, now time.Time, every time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.Requests++
	if r.Err != nil {
		s.h.Failed++
		s.h.LastError = r.Err.Error()
		s.h.Failing = true
		if errors.Is(r.Err, ErrNotConnected) {
			// A dial-in device away costs its line nothing (no timeout
			// waited): demoting it would only delay it once it is back.
			return
		}
		s.failsInRow++
		if s.failsInRow >= demoteAfter && !s.h.Demoted {
			s.h.Demoted, s.nextProbe = true, now.Add(every)
		}
		return
	}
	s.h.OK++
	s.h.LastRTT, s.h.LastAnswer, s.h.Failing = r.RTT, now, false
	if len(r.PDU) > 0 && r.PDU[0]&0x80 != 0 {
		s.h.Exceptions++
	}
	s.failsInRow, s.h.Demoted = 0, false
}

func (s *health) count(f func(h *Health)) {
	s.mu.Lock()
	f(&s.h)
	s.mu.Unlock()
}
