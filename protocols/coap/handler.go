package coap

import (
	"encoding/binary"
	"log/slog"
	"net/netip"
	"time"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// Handler serves CoAP over UDP (protocols.DatagramHandler: one Endpoint
// per worker) and over TCP (protocols.Handler: one session per
// connection), with the same resources over the same bus. It is safe for
// concurrent use.
type Handler struct {
	srv *server
}

var (
	_ protocols.Handler         = (*Handler)(nil)
	_ protocols.DatagramHandler = (*Handler)(nil)
)

// New returns a Handler over b. Zero cfg fields take the defaults; a nil
// log discards.
func New(cfg Config, b *bus.Bus, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{srv: &server{cfg: withDefaults(cfg), bus: b, stats: new(counters), log: log}}
}

// Config returns the configuration in effect, defaults filled in.
func (h *Handler) Config() Config { return h.srv.cfg }

// Stats returns a snapshot of the counters; safe from any goroutine.
func (h *Handler) Stats() Stats { return h.srv.stats.snapshot() }

// Route spreads peers over the workers by address: a CoAP exchange is
// tied to its endpoint's address (RFC 7252 section 5.3.2), so a peer that
// rebinds is a new peer anyway.
func (h *Handler) Route(peer netip.AddrPort, _ []byte, workers int) int {
	a := peer.Addr().As16()
	x := binary.LittleEndian.Uint64(a[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(a[8:])*0xc2b2ae3d27d4eb4f
	x ^= uint64(peer.Port()) * 0x165667b19e3779f9
	x ^= x >> 29
	return int(x % uint64(workers))
}

// Worker makes worker index's Endpoint, sending through out.
func (h *Handler) Worker(_, workers int, out protocols.DatagramOut) protocols.DatagramWorker {
	w := &udpWorker{out: out, stats: h.srv.stats}
	w.ep = newEndpoint(h.srv, workers, w.send, out.Wake)
	return w
}

// udpWorker is the I/O shell around one Endpoint.
type udpWorker struct {
	ep    *Endpoint
	out   protocols.DatagramOut
	stats *counters
}

var (
	_ protocols.DatagramWorker = (*udpWorker)(nil)
	_ protocols.DatagramWaker  = (*udpWorker)(nil)
)

func (w *udpWorker) send(to netip.AddrPort, b []byte) {
	if err := w.out.Send(to, b); err != nil { // longer than udp.max_datagram: lost, and counted
		w.stats.sendErrors.Add(1)
	}
}

// Datagrams feeds a batch to the endpoint.
func (w *udpWorker) Datagrams(batch []protocols.Datagram, now time.Time) {
	for _, d := range batch {
		w.ep.Input(d.Peer, d.Data, now)
	}
}

// Tick runs the endpoint's timers.
func (w *udpWorker) Tick(now time.Time) time.Duration { return w.ep.Tick(now) }

// Woken delivers notifications.
func (w *udpWorker) Woken(now time.Time) { w.ep.Woken(now) }

// Close forgets every peer.
func (w *udpWorker) Close() { w.ep.Close() }
