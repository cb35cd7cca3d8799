package rudp

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/protocols"
)

// App is what a Handler's sessions carry messages to. Its methods run on
// the session's worker goroutine, and may call the session's methods
// (Send, SendUnreliable, Close) there; msg is valid only during the
// call. A panic in one of them closes that session only.
type App interface {
	Opened(c *Conn)
	Message(c *Conn, msg []byte)
	Datagram(c *Conn, msg []byte)
	Closed(c *Conn, err error)
}

// HandlerStats counts what a Handler's workers did outside the sessions'
// own counters.
type HandlerStats struct {
	SendErrors  uint64 // datagrams DatagramOut refused
	Panics      uint64 // sessions closed because the App panicked
	MemoryInUse int    // message buffers of all workers' sessions
}

// Handler serves rudp on the gateway's datagram workers: it is the thin
// I/O shell (protocols.DatagramHandler) around one Endpoint per worker.
type Handler struct {
	cfg    Config
	budget *Budget // all workers' sessions together
	secret [32]byte
	app    App
	stats  struct{ sendErrors, panics atomic.Uint64 }
}

// NewHandler checks cfg and makes a handler whose sessions carry
// messages to app.
func NewHandler(cfg Config, app App) (*Handler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, app: app, budget: NewBudget(cfg.MemoryBudget)}
	if _, err := rand.Read(h.secret[:]); err != nil {
		return nil, err
	}
	return h, nil
}

// Stats returns the counters; safe from any goroutine.
func (h *Handler) Stats() HandlerStats {
	return HandlerStats{SendErrors: h.stats.sendErrors.Load(), Panics: h.stats.panics.Load(), MemoryInUse: h.budget.InUse()}
}

// Route is the package's Route: by session id, else by source address.
func (h *Handler) Route(peer netip.AddrPort, d []byte, workers int) int {
	return Route(peer, d, workers)
}

// Worker makes worker index's endpoint.
func (h *Handler) Worker(index, workers int, out protocols.DatagramOut) protocols.DatagramWorker {
	w := &worker{h: h, out: out, buf: make([]byte, 0, MaxDatagram), read: make([]byte, 0, 4096)}
	ep, err := NewEndpoint(h.cfg, EndpointOptions{
		Worker: index, Workers: workers, Secret: h.secret, Budget: h.budget,
		OnSession:  func(c *Conn) { w.call(c, func() { h.app.Opened(c) }) },
		OnReadable: w.readable,
		OnClosed:   func(c *Conn, err error) { w.call(c, func() { h.app.Closed(c, err) }) },
	}, time.Now())
	if err != nil {
		panic(fmt.Sprintf("rudp: a checked config fails: %v", err)) // NewHandler validated it
	}
	w.ep = ep
	return w
}

// worker is one worker's endpoint and its way out.
type worker struct {
	h    *Handler
	ep   *Endpoint
	out  protocols.DatagramOut
	buf  []byte
	read []byte
}

// Datagrams feeds a batch to the endpoint and sends what it answers.
func (w *worker) Datagrams(batch []protocols.Datagram, now time.Time) {
	for _, d := range batch {
		w.ep.Input(d.Peer, d.Data, now)
	}
	w.flush(now)
}

// Tick runs the timers and says when to come back (0: nothing pending).
func (w *worker) Tick(now time.Time) time.Duration {
	w.ep.Tick(now)
	w.flush(now)
	next := w.ep.NextDeadline()
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(now), time.Microsecond)
}

// Close ends every session.
func (w *worker) Close() { w.ep.Close() }

// flush sends everything the endpoint has now.
func (w *worker) flush(now time.Time) {
	for {
		out, to, ok := w.ep.AppendDatagram(w.buf[:0], now)
		if !ok {
			return
		}
		if err := w.out.Send(to, out); err != nil {
			w.h.stats.sendErrors.Add(1)
		}
	}
}

// readable hands a session's messages and datagrams to the App.
func (w *worker) readable(c *Conn) {
	w.call(c, func() {
		for c.State() != StateClosed {
			m, ok := c.ReadMessage(w.read[:0])
			if !ok {
				break
			}
			w.read = m[:0]
			w.h.app.Message(c, m)
		}
		for c.State() != StateClosed {
			m, ok := c.ReadDatagram(w.read[:0])
			if !ok {
				break
			}
			w.read = m[:0]
			w.h.app.Datagram(c, m)
		}
	})
}

// call runs an App callback; a panic closes the session it concerns and
// is counted, the worker lives on.
func (w *worker) call(c *Conn, f func()) {
	defer func() {
		if r := recover(); r != nil {
			w.h.stats.panics.Add(1)
			c.closeWith(CloseProtocol, "internal error")
		}
	}()
	f()
}
