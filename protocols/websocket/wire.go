package websocket

import (
	"errors"
	"net"
	"time"
)

// errNoInput is what wireConn.Read returns when gorilla asks for bytes the
// session has not handed it. The session only lets gorilla read whole
// messages, so this means a bug; gorilla's read side is dead after it
// (its first read error sticks) and the session closes with 1011.
var errNoInput = errors.New("websocket: read past the buffered message")

// wireConn is the net.Conn gorilla reads from and writes to. Reads come
// from the session's feed (the frames of one whole message) and never
// block; writes go to the session's staging buffer, which the session hands
// to protocols.Conn.Write in one piece, so gorilla never sees a short or
// failed write (its first write error would stick too). It is one pointer,
// so storing it in an interface does not allocate.
type wireConn struct{ s *session }

var _ net.Conn = wireConn{}

// Read serves the buffered message bytes, and fails rather than block when
// there are none.
func (w wireConn) Read(p []byte) (int, error) {
	s := w.s
	if len(s.feed) == 0 {
		return 0, errNoInput
	}
	n := copy(p, s.feed)
	s.feed = s.feed[n:]
	return n, nil
}

// Write stages p; the session flushes it when its call ends.
func (w wireConn) Write(p []byte) (int, error) {
	w.s.out = append(w.s.out, p...)
	return len(p), nil
}

// Close is called by gorilla only when an upgrade fails half-way; the
// session closes the real connection itself when the call ends.
func (w wireConn) Close() error {
	w.s.closing = true
	return nil
}

// LocalAddr is not known to a session; it reports an unspecified address.
func (w wireConn) LocalAddr() net.Addr { return &net.TCPAddr{} }

// RemoteAddr is the peer recorded at accept.
func (w wireConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(w.s.conn.Peer()) }

// Deadlines mean nothing here: reads never block and writes are buffered.
func (w wireConn) SetDeadline(time.Time) error      { return nil }
func (w wireConn) SetReadDeadline(time.Time) error  { return nil }
func (w wireConn) SetWriteDeadline(time.Time) error { return nil }
