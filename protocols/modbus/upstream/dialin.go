package upstream

import (
	"time"
)

// Dial-in lines. A device behind a cellular DTU cannot be dialled: it
// connects to the gateway's shared port and waits to be asked. Once the
// gateway has identified it (protocols/modbus, "Dial-in devices"), it
// hands the connection to the device's line with Attach, and the line
// speaks Modbus TCP over it as over a connection it opened itself. While
// nothing is attached, requests fail at once with ErrNotConnected (a
// master gets 0x0A, a poll publishes its tags stale) rather than waiting
// out a timeout.

// dialIn is a dial-in line's attachment, guarded by the line's mu.
type dialIn struct {
	port Port   // attached now, nil while the device is away
	peer string // its source address
}

// Attach makes p the line's connection to its device, from the next
// request on. A connection already attached is closed: a second call
// from the same device means the first is dead (a DTU re-dialling after
// its cellular link dropped, whose old TCP connection nobody closed). It
// reports whether one was replaced. The devices' demotion is lifted: a new
// connection is a new start. On a line that is not dial-in, or closed,
// p is closed and ErrUnavailable returned.
func (l *Line) Attach(p Port, peer string) (replaced bool, err error) {
	l.mu.Lock()
	if l.cfg.Kind != KindDialIn || l.closed {
		l.mu.Unlock()
		p.Close()
		return false, ErrUnavailable
	}
	old := l.dialIn.port
	l.dialIn = dialIn{port: p, peer: peer}
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	for _, d := range l.devices {
		d.health.connected(true, peer)
	}
	l.log.Info("dial-in device connected", "peer", peer, "replaced", old != nil)
	return old != nil, nil
}

// Detach forgets p if it is still the line's connection: it closed. Safe
// from any goroutine; a p that was already replaced changes nothing.
func (l *Line) Detach(p Port) {
	l.mu.Lock()
	if l.dialIn.port != p || p == nil {
		l.mu.Unlock()
		return
	}
	peer := l.dialIn.peer
	l.dialIn = dialIn{}
	l.mu.Unlock()
	for _, d := range l.devices {
		d.health.connected(false, peer)
	}
	l.log.Info("dial-in device disconnected", "peer", peer)
}

// takeAttached makes the attached connection the line's port, on the
// line's goroutine, dropping one that was replaced or closed.
func (l *Line) takeAttached(d *Device) error {
	l.mu.Lock()
	p := l.dialIn.port
	l.mu.Unlock()
	if p == l.port && p != nil {
		return nil
	}
	if l.port != nil {
		l.port.Close()
		l.port = nil
	}
	if p == nil {
		return ErrNotConnected
	}
	l.port, l.in, l.quietAt = p, l.in[:0], time.Now()
	if d.cfg.ConnectDelay > 0 && !l.sleep(d.cfg.ConnectDelay) {
		return ErrClosed
	}
	return nil
}

// connected records a dial-in device's connection coming or going.
func (s *health) connected(on bool, peer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.Connected, s.h.Peer = on, peer
	if on {
		s.h.Connects++
		s.failsInRow, s.h.Demoted = 0, false
	}
}
