package private

import (
	"fmt"

	"github.com/edgemux/edgemux/protocols"
)

var _ protocols.Drainer = (*session)(nil)

// Drain tells the device that the gateway is going away: an ERROR
// GOING_AWAY, the last frame on the connection (SPEC.md section 3). The
// gateway then flushes it, shuts its write side and closes when the device
// hangs up or the drain's grace ends. A device should reconnect later, to
// this gateway or another.
func (s *session) Drain() error {
	var buf [HeaderLen + 4 + 32]byte
	_ = s.conn.Write(AppendError(buf[:0], CodeGoingAway, CodeGoingAway.Text()))
	return fmt.Errorf("%w: %w", CodeGoingAway, protocols.ErrShutdown)
}
