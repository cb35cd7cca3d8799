package websocket

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	gorilla "github.com/gorilla/websocket"
)

// A gorilla Conn is needed only while a session reads a whole message or
// writes one, which always happens within one call from the worker. So a
// session holds none between calls: it borrows a lease, which carries a
// gorilla Conn and the staging buffer, for the length of one call, and
// gives it back when the call ends. Idle connections then cost only their
// session, not gorilla's Conn with its read buffer and handlers (about
// 0.7 KB each), and a worker's few leases serve all of its connections.
//
// A lease's Conn is interchangeable between sessions of the same variant
// because of how it is used: it sees only whole data messages (the
// session answers control frames itself), so its read side is back at a
// frame boundary after every message; it writes every message whole; and
// permessage-deflate as gorilla negotiates it keeps no context between
// messages. A Conn that has seen an error, or sent a close frame, keeps
// that state (gorilla's errors stick), so its lease is never given back.

// Lease variants: what kind of gorilla Conn the lease carries.
const (
	bare    = iota // none yet: before the upgrade
	plain          // upgraded without compression
	deflate        // upgraded with permessage-deflate
	variants
)

// lease is what a session borrows for one call. It is also the net.Conn
// its gorilla Conn reads from and writes to: reads come from feed (the
// frames of one whole message) and never block; writes go to out, which
// the session hands to protocols.Conn.Write in one piece when the call
// ends, so gorilla never sees a short or failed write (its first write
// error would stick too).
type lease struct {
	set     *settings         // the handler's settings for this call
	ws      *gorilla.Conn     // nil in a bare lease
	rw      *bufio.ReadWriter // what Hijack hands gorilla; its reader becomes ws's read buffer
	variant int
	s       *session // the borrower; nil while pooled
	feed    []byte   // what Read serves during one gorilla read
	out     []byte   // output staged during the call
	// shared marks the delivery texts in out that are shared with other
	// subscribers (bus.Message.Encoded), so that what the socket does not
	// take of them is kept by reference (protocols.SharedWriter).
	shared []sharedText
	frames [][]byte // flush's scratch

	batch      uint16 // data messages staged in out since the last flush
	deliveries uint16 // how many of them are deliveries
	opened     bool   // the session was upgraded when the call began: its peer has had the 101
}

var _ net.Conn = (*lease)(nil)

// errNoInput is what lease.Read returns when gorilla asks for bytes the
// session has not handed it. The session only lets gorilla read whole
// messages, so this means a bug; gorilla's read side is dead after it and
// the session closes with 1011.
var errNoInput = errors.New("websocket: read past the buffered message")

// leaseReadBuffer is the size of a lease's bufio.Reader. gorilla takes a
// hijacked reader bigger than 256 bytes as its Conn's read buffer (with
// Upgrader.ReadBufferSize 0), so the lease owns the Conn's read buffer and
// the session can check, after every message, that gorilla left nothing
// buffered: a Conn that did must not serve another session.
const leaseReadBuffer = 512

// hijackWriteBuffer is the writer gorilla borrows to build the 101.
const hijackWriteBuffer = 512

// newLease returns a bare lease with its bufio pair.
func newLease() *lease {
	l := &lease{variant: bare}
	l.rw = bufio.NewReadWriter(bufio.NewReaderSize(l, leaseReadBuffer), bufio.NewWriterSize(l, hijackWriteBuffer))
	return l
}

// residue is what gorilla has not read of the message it was fed: bytes
// still in feed, and bytes its read buffer took from feed but never used.
func (l *lease) residue() int { return len(l.feed) + l.rw.Reader.Buffered() }

// sharedText is a shared delivery text staged in out: the bytes before
// end are a copy of text.
type sharedText struct {
	end  int
	text []byte
}

// resetOut empties the staged output.
func (l *lease) resetOut() {
	l.out = l.out[:0]
	clear(l.shared)
	l.shared = l.shared[:0]
}

// staged notes that out ends with text, shared with other subscribers,
// when it does: compressed, the frame carries other bytes.
func (l *lease) staged(text []byte) {
	if l.variant == plain {
		l.shared = append(l.shared, sharedText{end: len(l.out), text: text})
	}
}

// stagedFrames is out as frames for protocols.SharedWriter: the shared
// texts, and the pieces of out between them.
func (l *lease) stagedFrames() [][]byte {
	frames, at := l.frames[:0], 0
	for _, st := range l.shared {
		if start := st.end - len(st.text); start > at {
			frames = append(frames, l.out[at:start])
		}
		frames = append(frames, st.text)
		at = st.end
	}
	if at < len(l.out) {
		frames = append(frames, l.out[at:])
	}
	l.frames = frames
	return frames
}

// maxPooledOut is the largest staging buffer a returned lease keeps, so
// one burst does not pin memory in the pool.
const maxPooledOut = 4 * flushAt

// leases pools leases per variant. sync.Pool keeps them per P, so the
// workers of a pool rarely contend, and lets the GC take back what a
// quiet gateway does not use.
type leases struct {
	pool  [variants]sync.Pool
	synth [variants]gorilla.Upgrader // makes the Conns of a variant when its pool is empty
}

// init sets up the synthetic upgraders; writePool is gorilla's frame
// buffer pool, shared with the real Upgrader.
func (ls *leases) init(writePool *sync.Pool) {
	for v := plain; v < variants; v++ {
		ls.synth[v] = gorilla.Upgrader{
			ReadBufferSize:    0, // the lease's reader (leaseReadBuffer)
			WriteBufferSize:   writeBufferSize,
			WriteBufferPool:   writePool,
			EnableCompression: v == deflate,
			CheckOrigin:       func(*http.Request) bool { return true },
			Error:             func(http.ResponseWriter, *http.Request, int, error) {},
		}
	}
}

// lend lends s a lease of the variant, making one if the pool has none.
func (h *Handler) lend(s *session, variant int) (*lease, error) {
	l, _ := h.leases.pool[variant].Get().(*lease)
	if l == nil {
		l = newLease()
		if variant != bare {
			if err := h.synthesize(l, variant); err != nil {
				return nil, err
			}
		}
	}
	l.s, l.set, l.opened = s, h.set.Load(), s.upgraded
	return l, nil
}

// giveBack pools a lease after a call that ended cleanly; after a failed
// one its Conn may hold a sticky error, so it is left to the GC. A bare
// lease has no Conn to spoil and is pooled either way, so refused
// handshakes do not cost a new one each.
func (h *Handler) giveBack(l *lease, clean bool) {
	l.s, l.set, l.feed = nil, nil, nil
	l.batch, l.deliveries = 0, 0
	if !clean && l.ws != nil {
		return
	}
	if cap(l.out) > maxPooledOut {
		l.out = nil
	}
	l.resetOut()
	h.leases.pool[l.variant].Put(l)
}

// adopt decides what becomes of the Conn an upgrade made over the bare
// lease l. Every handshake makes one, but the connection needs one only
// per call, from the pool: so the lease keeps it (and joins its variant's
// pool when the call ends) only if that pool has none, and otherwise stays
// bare and the Conn is garbage at once. Keeping every one would grow the
// pool by a Conn per handshake until the GC empties it, a peak of about
// 1 KB per new connection.
func (h *Handler) adopt(l *lease, ws *gorilla.Conn, compressed bool) {
	variant := plain
	if compressed {
		variant = deflate
	}
	if spare := h.leases.pool[variant].Get(); spare != nil {
		h.leases.pool[variant].Put(spare)
		return
	}
	l.ws, l.variant = ws, variant
}

// synthesize gives l a gorilla Conn of the variant. gorilla has no public
// server constructor, so it upgrades a request made up for the purpose
// through the Hijacker shim and throws the 101 response away.
func (h *Handler) synthesize(l *lease, variant int) error {
	req := &http.Request{
		Method: http.MethodGet,
		Header: http.Header{
			"Connection":            {"Upgrade"},
			"Upgrade":               {"websocket"},
			"Sec-Websocket-Version": {"13"},
			"Sec-Websocket-Key":     {"dGhlIHNhbXBsZSBub25jZQ=="}, // RFC 6455's sample
		},
	}
	if variant == deflate {
		req.Header["Sec-Websocket-Extensions"] = []string{"permessage-deflate"}
	}
	ws, err := h.leases.synth[variant].Upgrade(&responseShim{l: l}, req, nil)
	l.resetOut()
	if err != nil {
		return fmt.Errorf("%w: making a gorilla Conn: %w", ErrInternal, err)
	}
	h.n.codecs.Add(1)
	l.ws, l.variant = ws, variant
	return nil
}

// Read serves the buffered message bytes, and fails rather than block when
// there are none.
func (l *lease) Read(p []byte) (int, error) {
	if len(l.feed) == 0 {
		return 0, errNoInput
	}
	n := copy(p, l.feed)
	l.feed = l.feed[n:]
	return n, nil
}

// Write stages p; the session flushes it when its call ends.
func (l *lease) Write(p []byte) (int, error) {
	l.out = append(l.out, p...)
	return len(p), nil
}

// Close is called by gorilla only when an upgrade fails half-way; the
// session closes the real connection itself when the call ends.
func (l *lease) Close() error {
	if l.s != nil {
		l.s.closing = true
	}
	return nil
}

// LocalAddr is not known to a session; it reports an unspecified address.
func (l *lease) LocalAddr() net.Addr { return &net.TCPAddr{} }

// RemoteAddr is the borrower's peer, recorded at accept.
func (l *lease) RemoteAddr() net.Addr {
	if l.s == nil {
		return &net.TCPAddr{}
	}
	return net.TCPAddrFromAddrPort(l.s.conn.Peer())
}

// Deadlines mean nothing here: reads never block and writes are buffered.
func (l *lease) SetDeadline(time.Time) error      { return nil }
func (l *lease) SetReadDeadline(time.Time) error  { return nil }
func (l *lease) SetWriteDeadline(time.Time) error { return nil }
