package websocket

import "github.com/edgemux/edgemux/protocols"

var _ protocols.Drainer = (*session)(nil)

// Drain starts the closing handshake with 1001 (going away). The session
// handles nothing more after it: the peer's next frame, normally its
// close echo, ends the connection, and a peer that never answers is cut
// when the drain's grace ends. A connection still in its HTTP handshake is
// closed at once.
func (s *session) Drain() (err error) {
	if s.closing || !s.upgraded {
		return protocols.ErrShutdown
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = s.panicked(r)
		}
		err = s.end(err)
	}()
	s.goingAway = true
	return s.closeWith(CloseGoingAway, "gateway shutting down", nil)
}
