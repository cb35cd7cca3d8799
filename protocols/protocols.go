// Package protocols defines what a protocol handler implements and what the
// gateway's workers give it: the worker-facing contract shared by every
// protocols/<name> package.
//
// A connection is owned by one worker for its whole life. The worker reads
// the socket to EAGAIN (the epoll loop is edge-triggered), keeps whatever a
// session has not consumed yet, and calls the session from its own goroutine
// only, so a session needs no locks for its own state. Output goes through
// Conn.Write, which writes at once when it can and otherwise buffers up to a
// high-water mark and flushes on EPOLLOUT.
//
// Sessions that are fed from elsewhere (a bus subscription, say) call
// Conn.Notify from any goroutine; the owning worker then calls the session's
// Notified method on its own goroutine. A session that holds such output
// back while the socket is full implements Writable, which the worker
// calls once the buffered output is written.
package protocols

import (
	"errors"
	"net/netip"
	"time"
)

// Errors a worker reports to sessions or that sessions return to it.
var (
	// ErrBackpressure is returned by Conn.Write when the output buffer
	// would grow past its high-water mark: the peer does not read.
	ErrBackpressure = errors.New("protocols: output buffer over high-water mark")
	// ErrClosed is returned by Conn.Write after the connection is closed.
	ErrClosed = errors.New("protocols: connection closed")
	// ErrPeerClosed is the reason a session sees when the peer hung up.
	ErrPeerClosed = errors.New("protocols: peer closed the connection")
	// ErrIdle is the reason a session sees when its idle timeout passed.
	ErrIdle = errors.New("protocols: idle timeout")
	// ErrShutdown is the reason a session sees when the gateway drains.
	ErrShutdown = errors.New("protocols: gateway shutting down")
	// ErrMalformed is wrapped by sessions that reject their input; the
	// worker then records the connection with the quarantine book.
	ErrMalformed = errors.New("protocols: malformed input")
	// ErrPanic is wrapped by sessions that recovered a panic of their own
	// (to answer their peer in its protocol's words before the close); the
	// worker counts and records it as a panic it recovered itself.
	ErrPanic = errors.New("protocols: session panicked")
)

// Reason says why a connection was sent to the quarantine pool.
type Reason string

// The reasons the quarantine pool counts.
const (
	ReasonNone      Reason = ""
	ReasonTimeout   Reason = "timeout"   // nothing classifiable before the sniff deadline
	ReasonNoMatch   Reason = "no-match"  // bytes that no detector claims
	ReasonOversize  Reason = "oversize"  // still undecided at the sniff byte budget
	ReasonMalformed Reason = "malformed" // a handler rejected its input
	ReasonPanic     Reason = "panic"     // a handler panicked
	ReasonRouted    Reason = "routed"    // a route says quarantine
)

// Conn is one connection as its owning worker sees it. Every method but
// Notify must be called on the owning worker's goroutine.
type Conn interface {
	// ID is unique among open connections: the fd in the high 32 bits and
	// the registry generation in the low 32; for a session over the
	// reliable UDP core, its random 64-bit session id.
	ID() uint64
	// Peer is the remote address, recorded at accept.
	Peer() netip.AddrPort
	// Reason is why the connection was quarantined; ReasonNone elsewhere.
	Reason() Reason
	// Write sends p or buffers what the socket does not take now. It
	// returns ErrBackpressure (and buffers nothing) when the buffered
	// output would exceed the high-water mark, and ErrClosed after Close.
	// Write copies what it keeps: p may be reused as soon as it returns.
	Write(p []byte) error
	// Buffered is how many output bytes wait for the socket.
	Buffered() int
	// Close flushes what it can without blocking and closes the
	// connection; the session's Closed is called with reason. Closing
	// twice is harmless.
	Close(reason error)
	// SetTimer asks the worker to call the session's Timer method once d
	// has passed (resolution 100 ms); a later call replaces an earlier one
	// and d <= 0 cancels it. For keepalives and handshake deadlines.
	SetTimer(d time.Duration)
	// CountDropped records that n messages meant for this connection were
	// dropped (its subscriber's queue overflowed, say). The gateway keeps
	// the count per connection for the registry view; telling the peer is
	// the session's job, in its protocol's words.
	CountDropped(n int)
	// Notify asks the owning worker to call the session's Notified soon.
	// Safe from any goroutine; calls that arrive before the worker runs
	// coalesce into one.
	Notify()
}

// Counter is one of a handler's counters by name (snake_case), as its
// Stats().Counters() lists them for exporters: metrics, the dashboard.
type Counter struct {
	Name string
	N    uint64
}

// Handler starts sessions for the connections a pool's workers receive.
// One Handler serves all workers of its pool, so it must be safe for
// concurrent use; per-connection state lives in the Session.
type Handler interface {
	// Open is called on the owning worker when the connection is handed
	// over; the bytes the sniffer peeked are still unread. An error closes
	// the connection and is counted with its text.
	Open(c Conn) (Session, error)
}

// Session is the handler's state for one connection.
type Session interface {
	// Data is given all input not consumed yet (never empty) and returns
	// how much it consumed. in is valid only during the call: the worker
	// reuses the buffer, so a session copies what it keeps. The worker keeps the rest and calls again when more
	// arrives; unconsumed input beyond the pool's input limit closes the
	// connection. An error closes the connection with that reason.
	Data(in []byte) (consumed int, err error)
	// Closed is called exactly once, when the connection ends for the
	// session: no call follows it. The socket is closed by then, except
	// while the gateway drains, when output the session wrote may still be
	// on its way to the peer (see Drainer).
	Closed(reason error)
}

// SharedWriter is implemented by connections that can keep what the
// socket does not take of a write as references to the caller's frames
// instead of a copy. A fan-out's subscribers share one encoding of each
// message (bus.Message.Encoded); written with WriteShared, a subscriber
// that falls behind holds a slice header per frame, not the frame's bytes.
type SharedWriter interface {
	// WriteShared is Conn.Write for p made of frames, one after the
	// other. A frame that lies in p's array is the caller's and is copied
	// if kept, like Write's bytes; any other is shared: nobody changes it,
	// and it may be kept for as long as the connection needs it.
	WriteShared(p []byte, frames [][]byte) error
}

// Notified is implemented by sessions that use Conn.Notify.
type Notified interface {
	// Notified runs on the owning worker after one or more Notify calls.
	Notified() error
}

// Writable is implemented by sessions that hold output back while the
// socket does not take it (deliveries waiting in a bus queue, say, rather
// than piling up in the output buffer until the high-water mark).
type Writable interface {
	// Writable runs on the owning worker when output that was buffered
	// (Buffered() > 0) has all been written. An error closes the
	// connection with that reason.
	Writable() error
}

// Timed is implemented by sessions that use Conn.SetTimer.
type Timed interface {
	// Timer runs on the owning worker when the timer set with SetTimer
	// fires. An error closes the connection with that reason.
	Timer() error
}

// Drainer is implemented by sessions that have something to tell their
// peer when the gateway drains (WebSocket close 1001, a private GOING_AWAY
// ERROR, ...). The owning worker calls Drain once per session when the
// drain begins, or right after Open for a connection handed over during
// one. The session writes its goodbye with Conn.Write and says whether it
// is done:
//   - a non-nil error (protocols.ErrShutdown, say): close the connection
//     with that reason;
//   - nil: keep the connection; the session waits for its peer, which it
//     asked to go, and is closed when the peer hangs up, when a later
//     call returns an error, or when the drain's grace ends.
//
// A connection that closes while the gateway drains is closed gracefully:
// its buffered output is flushed as the peer reads it and the write side
// shut before the socket closes, within the grace. Sessions that do not
// implement Drainer are closed that way at once.
type Drainer interface {
	Drain() error
}

// Prober is implemented by handlers that can wake up silent peers: dial-in
// devices that speak only when spoken to. When the sniff deadline passes
// with nothing received and a probe is configured for the listener, the
// worker calls Probe; the session it returns then receives the answer.
type Prober interface {
	Probe(c Conn) (Session, error)
}
