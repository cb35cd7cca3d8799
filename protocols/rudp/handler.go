package rudp

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"sync"
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

// What an App may also implement; each runs on the session's worker
// goroutine, like App's methods.
type (
	// AppNotified: Notified runs after Handler.Notify(c.ID()) from any
	// goroutine (a bus subscription that has messages for the session).
	AppNotified interface{ Notified(c *Conn) }
	// AppSent: Sent runs when everything Send queued is acknowledged.
	AppSent interface{ Sent(c *Conn) }
	// AppTimer: Timer runs when the session's SetTimer deadline passes.
	AppTimer interface{ Timer(c *Conn) }
	// AppDrainer: Drain runs once per session when the gateway drains
	// (and at once for a session opened during the drain). The session
	// says goodbye in its protocol's words and closes; the gateway waits
	// for every session to end, or for the grace. A session whose App
	// has no Drain is closed (a CLOSE frame) at once.
	AppDrainer interface{ Drain(c *Conn) }
)

// HandlerStats counts what a Handler's workers did outside the sessions'
// own counters.
type HandlerStats struct {
	SendErrors  uint64 // datagrams DatagramOut refused
	Panics      uint64 // sessions closed because the App panicked
	MemoryInUse int    // message buffers of all workers' sessions
	// Endpoints sums the workers' endpoint counters as of their last
	// Tick (Sessions: open then; MemoryInUse: theirs).
	Endpoints EndpointStats
}

// Handler serves rudp on the gateway's datagram workers: it is the thin
// I/O shell (protocols.DatagramHandler) around one Endpoint per worker.
type Handler struct {
	cfg     Config
	budget  *Budget // all workers' sessions together
	secret  [32]byte
	app     App
	stats   struct{ sendErrors, panics atomic.Uint64 }
	workers atomic.Pointer[[]*worker] // by index, for Notify; copied on write
	mu      sync.Mutex                // serialises Worker's copy
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
	st := HandlerStats{SendErrors: h.stats.sendErrors.Load(), Panics: h.stats.panics.Load(), MemoryInUse: h.budget.InUse()}
	if list := h.workers.Load(); list != nil {
		for _, w := range *list {
			if w != nil {
				st.Endpoints.add(w.published())
			}
		}
	}
	return st
}

// Route is the package's Route: by session id, else by source address.
func (h *Handler) Route(peer netip.AddrPort, d []byte, workers int) int {
	return Route(peer, d, workers)
}

// Worker makes worker index's endpoint.
func (h *Handler) Worker(index, workers int, out protocols.DatagramOut) protocols.DatagramWorker {
	w := &worker{h: h, out: out, buf: make([]byte, 0, MaxDatagram), read: make([]byte, 0, 4096)}
	opts := EndpointOptions{
		Worker: index, Workers: workers, Secret: h.secret, Budget: h.budget,
		OnSession:  w.opened,
		OnReadable: w.readable,
		OnClosed:   func(c *Conn, err error) { w.call(c, func() { h.app.Closed(c, err) }) },
	}
	if a, ok := h.app.(AppSent); ok {
		opts.OnSent = func(c *Conn) { w.call(c, func() { a.Sent(c) }) }
	}
	if a, ok := h.app.(AppTimer); ok {
		opts.OnTimer = func(c *Conn) { w.call(c, func() { a.Timer(c) }) }
	}
	ep, err := NewEndpoint(h.cfg, opts, time.Now())
	if err != nil {
		panic(fmt.Sprintf("rudp: a checked config fails: %v", err)) // NewHandler validated it
	}
	w.ep = ep
	h.register(index, workers, w)
	return w
}

// register records w as worker index of workers, for Notify.
func (h *Handler) register(index, workers int, w *worker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := make([]*worker, workers)
	if old := h.workers.Load(); old != nil && len(*old) == workers {
		copy(list, *old)
	}
	list[index] = w
	h.workers.Store(&list)
}

// Notify asks the worker that owns session id to call the App's Notified
// for it (AppNotified) soon. Safe from any goroutine; the App coalesces
// repeated calls if it wants to (a flag per session). A session that has
// ended by then is skipped.
func (h *Handler) Notify(id uint64) {
	list := h.workers.Load()
	if list == nil || len(*list) == 0 {
		return
	}
	if w := (*list)[id%uint64(len(*list))]; w != nil {
		w.notify(id)
	}
}

// worker is one worker's endpoint and its way out.
type worker struct {
	h    *Handler
	ep   *Endpoint
	out  protocols.DatagramOut
	buf  []byte
	read []byte

	notifyMu sync.Mutex
	notified []uint64 // session ids from Notify, any goroutine
	taken    []uint64 // the worker's copy

	draining bool

	statsMu sync.Mutex
	stats   EndpointStats // the endpoint's, as of the last Tick
}

// publish copies the endpoint's counters for Stats (other goroutines).
func (w *worker) publish() {
	st := w.ep.Stats()
	w.statsMu.Lock()
	w.stats = st
	w.statsMu.Unlock()
}

func (w *worker) published() EndpointStats {
	w.statsMu.Lock()
	defer w.statsMu.Unlock()
	return w.stats
}

var (
	_ protocols.DatagramWaker   = (*worker)(nil)
	_ protocols.DatagramDrainer = (*worker)(nil)
	_ protocols.DatagramIdler   = (*worker)(nil)
)

// opened tells the App of a new session, and, during a drain, that the
// gateway is going.
func (w *worker) opened(c *Conn) {
	w.call(c, func() { w.h.app.Opened(c) })
	if w.draining && c.State() != StateClosed {
		w.drainSession(c)
	}
}

// notify queues id for Woken; any goroutine.
func (w *worker) notify(id uint64) {
	w.notifyMu.Lock()
	w.notified = append(w.notified, id)
	w.notifyMu.Unlock()
	w.out.Wake()
}

// Woken gives the App's Notified the sessions Notify named.
func (w *worker) Woken(now time.Time) {
	w.notifyMu.Lock()
	w.taken, w.notified = w.notified, w.taken[:0]
	w.notifyMu.Unlock()
	a, ok := w.h.app.(AppNotified)
	for _, id := range w.taken {
		if c := w.ep.Session(id); ok && c != nil && c.State() < StateClosing {
			w.call(c, func() { a.Notified(c) })
		}
	}
	w.flush(now)
}

// Drain tells every session that the gateway is going.
func (w *worker) Drain(now time.Time) {
	w.draining = true
	w.ep.EachSession(w.drainSession)
	w.flush(now)
}

func (w *worker) drainSession(c *Conn) {
	if a, ok := w.h.app.(AppDrainer); ok {
		w.call(c, func() { a.Drain(c) })
		return
	}
	c.Close()
}

// Drained reports whether every session has ended.
func (w *worker) Drained() bool { return w.ep.Stats().Sessions == 0 }

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
	w.publish()
	next := w.ep.NextDeadline()
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(now), time.Microsecond)
}

// Idle is protocols.DatagramIdler: the endpoint has carried no data and
// taken no INITIAL for a second.
func (w *worker) Idle(now time.Time) bool { return w.ep.Idle(now) }

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
