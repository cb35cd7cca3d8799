package rudp

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/protocols"
)

// Stream protocols over rudp sessions. A protocol written for the TCP
// side (a protocols.Handler whose sessions read a byte stream of frames:
// the private protocol) runs unchanged over rudp: each session's reliable
// messages, in order, are its input stream (a frame may span messages),
// and what it writes goes out as reliable messages. So HELLO, PUB, SUB
// and the rest mean the same over UDP as over TCP, and UDP devices reach
// the same bus. The unreliable channel carries whole frames only (each
// datagram one or more); a datagram with a partial frame is dropped and
// counted. Answers always go on the reliable channel.
//
// protocols.Conn over a rudp session:
//   - Write queues reliable messages (at most MaxMessage each; a longer
//     write is split). When the session's send queue has no room for all
//     of it, Write returns protocols.ErrBackpressure and queues nothing.
//   - Buffered is what is sent but not yet acknowledged; Writable runs
//     when all of it is acknowledged.
//   - Close tells the session Closed at once, and ends the rudp session
//     once what was written (a goodbye, an ERROR) is acknowledged, or at
//     the idle timeout if the peer never acknowledges.
//   - SetTimer, Notify, CountDropped as over TCP.
//   - ID is the session id; Peer the address it last came from.

// StreamOptions tune a stream handler; zero fields take defaults.
type StreamOptions struct {
	// MaxInput bounds the input a session has not consumed yet (a
	// frame arriving in pieces); past it the session is closed as
	// malformed. Default 65,552: a 64 KiB frame and its header.
	MaxInput int
}

const defaultMaxInput = 65536 + 16

// StreamStats are what the stream layer counted since it started.
type StreamStats struct {
	Open       int64  // sessions open now
	Opened     uint64 // sessions ever opened
	BadInput   uint64 // sessions closed for input past MaxInput
	Fragmented uint64 // unreliable datagrams dropped for a partial frame
	Dropped    uint64 // messages CountDropped recorded
}

// SessionView is one session as the registry view shows it.
type SessionView struct {
	ID       uint64         `json:"id"`
	Peer     netip.AddrPort `json:"peer"`
	OpenedAt time.Time      `json:"opened_at"`
	In       uint64         `json:"messages_in"`
	Out      uint64         `json:"messages_out"`
	Dropped  uint64         `json:"dropped"`
}

// Streams is the App that runs a protocols.Handler's sessions over a
// Handler's rudp sessions. Make both with NewStreamHandler.
type Streams struct {
	proto protocols.Handler
	h     *Handler
	opts  StreamOptions

	open                         atomic.Int64
	opened, badInput, fragmented atomic.Uint64
	dropped                      atomic.Uint64
	mu                           sync.Mutex
	views                        map[uint64]*streamConn // for Sessions, any goroutine
}

// NewStreamHandler makes a Handler whose sessions carry proto's sessions,
// and the Streams that counts and lists them.
func NewStreamHandler(cfg Config, proto protocols.Handler, opts StreamOptions) (*Handler, *Streams, error) {
	if opts.MaxInput <= 0 {
		opts.MaxInput = defaultMaxInput
	}
	s := &Streams{proto: proto, opts: opts, views: map[uint64]*streamConn{}}
	h, err := NewHandler(cfg, s)
	if err != nil {
		return nil, nil, err
	}
	s.h = h
	return h, s, nil
}

// Stats returns the counters; any goroutine.
func (s *Streams) Stats() StreamStats {
	return StreamStats{Open: s.open.Load(), Opened: s.opened.Load(), BadInput: s.badInput.Load(),
		Fragmented: s.fragmented.Load(), Dropped: s.dropped.Load()}
}

// Sessions lists at most limit open sessions, oldest first; any
// goroutine.
func (s *Streams) Sessions(limit int) []SessionView {
	s.mu.Lock()
	views := make([]SessionView, 0, min(limit, len(s.views)))
	for _, sc := range s.views {
		views = append(views, sc.view())
	}
	s.mu.Unlock()
	sort.Slice(views, func(i, j int) bool { return views[i].OpenedAt.Before(views[j].OpenedAt) })
	return views[:min(limit, len(views))]
}

// Opened starts the protocol's session for a new rudp session.
func (s *Streams) Opened(c *Conn) {
	sc := &streamConn{s: s, c: c, id: c.ID(), openedAt: time.Now()}
	peer := c.Peer()
	sc.peer.Store(&peer)
	c.SetValue(sc)
	s.opened.Add(1)
	s.open.Add(1)
	s.mu.Lock()
	s.views[sc.id] = sc
	s.mu.Unlock()
	sess, err := s.proto.Open(sc)
	if err != nil {
		sc.Close(err)
		return
	}
	sc.sess = sess
}

// Message feeds a reliable message to the session's input stream.
func (s *Streams) Message(c *Conn, msg []byte) {
	sc := of(c)
	if sc == nil || sc.done {
		return
	}
	sc.in.Add(1)
	sc.notePeer()
	if len(sc.input) == 0 {
		consumed, err := sc.sess.Data(msg)
		if err != nil {
			sc.Close(err)
			return
		}
		sc.keep(msg[consumed:])
		return
	}
	if sc.keep(msg); sc.done {
		return
	}
	consumed, err := sc.sess.Data(sc.input)
	if err != nil {
		sc.Close(err)
		return
	}
	sc.input = append(sc.input[:0], sc.input[consumed:]...)
	if len(sc.input) == 0 && cap(sc.input) > 4096 {
		sc.input = nil // a large frame passed: do not hold its buffer
	}
}

// Datagram feeds an unreliable message, which must hold whole frames.
func (s *Streams) Datagram(c *Conn, msg []byte) {
	sc := of(c)
	if sc == nil || sc.done {
		return
	}
	sc.in.Add(1)
	sc.notePeer()
	consumed, err := sc.sess.Data(msg)
	if err != nil {
		sc.Close(err)
		return
	}
	if consumed < len(msg) {
		s.fragmented.Add(1)
	}
}

// Closed ends the protocol's session, if Close did not already.
func (s *Streams) Closed(c *Conn, err error) {
	sc := of(c)
	if sc == nil {
		return
	}
	sc.end(reasonOf(err))
	s.mu.Lock()
	delete(s.views, sc.id)
	s.mu.Unlock()
	s.open.Add(-1)
	c.SetValue(nil)
}

// Notified runs the session's Notified (protocols.Notified).
func (s *Streams) Notified(c *Conn) {
	sc := of(c)
	if sc == nil || sc.done {
		return
	}
	sc.notified.Store(false)
	if n, ok := sc.sess.(protocols.Notified); ok {
		if err := n.Notified(); err != nil {
			sc.Close(err)
		}
	}
}

// Sent ends a lingering session, or tells the protocol its output is out
// (protocols.Writable).
func (s *Streams) Sent(c *Conn) {
	sc := of(c)
	if sc == nil {
		return
	}
	if sc.done {
		if sc.linger {
			c.Close()
		}
		return
	}
	if w, ok := sc.sess.(protocols.Writable); ok {
		if err := w.Writable(); err != nil {
			sc.Close(err)
		}
	}
}

// Timer runs the session's Timer (protocols.Timed).
func (s *Streams) Timer(c *Conn) {
	sc := of(c)
	if sc == nil || sc.done {
		return
	}
	if t, ok := sc.sess.(protocols.Timed); ok {
		if err := t.Timer(); err != nil {
			sc.Close(err)
		}
	}
}

// Drain gives the session its Drain (protocols.Drainer), or closes it.
func (s *Streams) Drain(c *Conn) {
	sc := of(c)
	if sc == nil || sc.done {
		c.Close()
		return
	}
	d, ok := sc.sess.(protocols.Drainer)
	if !ok {
		sc.Close(protocols.ErrShutdown)
		return
	}
	if err := d.Drain(); err != nil {
		sc.Close(err)
	}
}

func of(c *Conn) *streamConn {
	sc, _ := c.Value().(*streamConn)
	return sc
}

// reasonOf says why a rudp session ended in the words protocols use.
func reasonOf(err error) error {
	switch {
	case err == nil, errors.Is(err, ErrPeerClosed):
		return protocols.ErrPeerClosed
	case errors.Is(err, ErrIdle), errors.Is(err, ErrHandshake):
		return fmt.Errorf("%w: %w", protocols.ErrIdle, err)
	case errors.Is(err, ErrClosed):
		return protocols.ErrShutdown // the endpoint closed every session
	}
	return err
}

// streamConn is protocols.Conn over one rudp session. Its methods run on
// the session's worker goroutine, but Notify (any goroutine) and view
// (the registry view's).
type streamConn struct {
	s        *Streams
	c        *Conn
	id       uint64
	sess     protocols.Session
	input    []byte // unconsumed input
	done     bool   // the session was told Closed
	linger   bool   // end the rudp session once its output is acknowledged
	openedAt time.Time

	notified      atomic.Bool
	peer          atomic.Pointer[netip.AddrPort]
	in, out, drop atomic.Uint64
}

var _ protocols.Conn = (*streamConn)(nil)

func (sc *streamConn) ID() uint64               { return sc.id }
func (sc *streamConn) Peer() netip.AddrPort     { return *sc.peer.Load() }
func (sc *streamConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (sc *streamConn) Buffered() int            { return sc.c.Buffered() }
func (sc *streamConn) SetTimer(d time.Duration) { sc.c.SetTimer(d) }

// Write queues p as reliable messages, all or nothing.
func (sc *streamConn) Write(p []byte) error {
	if sc.done || sc.c.State() >= StateClosing {
		return protocols.ErrClosed
	}
	if len(p) == 0 {
		return nil
	}
	limit := sc.c.MaxMessage()
	parts := (len(p) + limit - 1) / limit
	frag := max(sc.c.fragSize, 1)
	frags := parts + len(p)/frag
	if sc.c.snd.bytes+len(p)+frags*minCharge > sc.c.cfg.SendQueue {
		return protocols.ErrBackpressure
	}
	for len(p) > 0 {
		n := min(len(p), limit)
		if err := sc.c.Send(p[:n]); err != nil {
			// Only the memory budget can fail a Send that had room: the
			// stream now has a hole, so the session cannot go on.
			sc.c.closeWith(CloseProtocol, "out of memory")
			return fmt.Errorf("%w: %w", protocols.ErrClosed, err)
		}
		sc.out.Add(1)
		p = p[n:]
	}
	return nil
}

// Close ends the protocol's session now and the rudp session once what
// it wrote is acknowledged.
func (sc *streamConn) Close(reason error) {
	if sc.done {
		return
	}
	sc.end(reason)
	if sc.c.Buffered() > 0 {
		sc.linger = true
		return
	}
	sc.c.Close()
}

// end tells the session Closed, once.
func (sc *streamConn) end(reason error) {
	if sc.done {
		return
	}
	sc.done = true
	sc.input = nil
	if sc.sess != nil {
		sc.sess.Closed(reason)
	}
}

func (sc *streamConn) CountDropped(n int) {
	sc.drop.Add(uint64(n))
	sc.s.dropped.Add(uint64(n))
}

// Notify asks the worker for Notified; calls before it runs coalesce.
func (sc *streamConn) Notify() {
	if sc.notified.CompareAndSwap(false, true) {
		sc.s.h.Notify(sc.id)
	}
}

// keep adds unconsumed input, closing the session past MaxInput.
func (sc *streamConn) keep(b []byte) {
	if len(b) == 0 {
		return
	}
	if len(sc.input)+len(b) > sc.s.opts.MaxInput {
		sc.s.badInput.Add(1)
		sc.Close(fmt.Errorf("%w: more than %d bytes of unconsumed input", protocols.ErrMalformed, sc.s.opts.MaxInput))
		return
	}
	sc.input = append(sc.input, b...)
}

// notePeer records the session's address after a rebinding.
func (sc *streamConn) notePeer() {
	if p := sc.c.Peer(); p != *sc.peer.Load() {
		sc.peer.Store(&p)
	}
}

func (sc *streamConn) view() SessionView {
	return SessionView{ID: sc.id, Peer: *sc.peer.Load(), OpenedAt: sc.openedAt,
		In: sc.in.Load(), Out: sc.out.Load(), Dropped: sc.drop.Load()}
}
