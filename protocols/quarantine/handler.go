package quarantine

import (
	"net/netip"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
)

// Handler is the protocols.Handler of the quarantine pool. It is safe for
// concurrent use: it holds only its book and the normalized config.
type Handler struct {
	book        *Book
	sampleBytes int
}

var _ protocols.Handler = (*Handler)(nil)

// NewHandler returns the quarantine pool's handler, recording into b.
// cfg is normalized (see Normalize); its Hold is enforced by the worker's
// idle timer, which the gateway sets to Normalize(cfg).Hold.
func NewHandler(b *Book, cfg config.Quarantine) *Handler {
	return &Handler{book: b, sampleBytes: Normalize(cfg).SampleBytes}
}

// Open starts a session that notes why c landed here and who sent it.
func (h *Handler) Open(c protocols.Conn) (protocols.Session, error) {
	return &session{h: h, conn: c, peer: c.Peer(), reason: c.Reason()}, nil
}

// session holds one quarantined connection. It is kept small: the sample
// buffer is allocated only when bytes arrive, and never beyond SampleBytes.
type session struct {
	h        *Handler
	conn     protocols.Conn
	peer     netip.AddrPort
	reason   protocols.Reason
	sample   []byte
	closing  bool // Close was asked for; later input is only drained
	recorded bool // Record was called; Closed never records twice
}

// Data samples the first bytes and consumes everything, so the socket
// drains and no input accumulates. A connection that landed here for a
// reason other than a timeout has shown what it sends and is closed at
// once; a silent (timeout) one is held until its sample is full or the
// worker's idle timer (Hold) closes it.
func (s *session) Data(in []byte) (int, error) {
	if s.closing {
		return len(in), nil
	}
	if room := s.h.sampleBytes - len(s.sample); room > 0 && len(in) > 0 {
		if s.sample == nil {
			s.sample = make([]byte, 0, s.h.sampleBytes)
		}
		s.sample = append(s.sample, in[:min(room, len(in))]...)
	}
	if len(s.sample) >= s.h.sampleBytes || s.reason != protocols.ReasonTimeout {
		s.closing = true
		s.conn.Close(ErrQuarantined)
	}
	return len(in), nil
}

// Closed records the connection with the book, once, with whatever sample
// it got.
func (s *session) Closed(error) {
	if s.recorded {
		return
	}
	s.recorded = true
	s.closing = true
	s.h.book.Record(s.peer, s.reason, s.sample)
	s.sample = nil
}
