package modbus

import "github.com/edgemux/edgemux/protocols"

var _ protocols.Drainer = (*session)(nil)

// Drain lets a master's request in flight finish: Modbus TCP has no way
// to say "going away", so a master with nothing in flight is closed at
// once, and one whose request has partly arrived gets its answer when the
// rest comes (within the drain's grace), then the connection closes.
func (s *session) Drain() error {
	if !s.partial && len(s.queue) == 0 {
		return protocols.ErrShutdown
	}
	s.draining = true
	return nil
}
