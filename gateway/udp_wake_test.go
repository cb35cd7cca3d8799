package gateway

// DatagramOut.Wake and DatagramDrainer through real sockets: a datagram
// worker fed from other goroutines (as a bus subscription feeds a session)
// is woken for every item, never stranded; a drain waits for the datagram
// sessions to end, and the grace cuts those that do not.

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols"
)

// wakeHandler's workers keep the last peer that wrote to them; Woken
// sends that peer one 1 KiB datagram for every item others queued
// (pending), numbered; Drain ends "sessions" when the peer says bye.
type wakeHandler struct {
	mu      sync.Mutex
	workers []*wakeWorker
}

func (h *wakeHandler) Route(_ netip.AddrPort, d []byte, workers int) int {
	return int(dgSession(d) % uint64(workers))
}

func (h *wakeHandler) Worker(index, workers int, out protocols.DatagramOut) protocols.DatagramWorker {
	w := &wakeWorker{out: out}
	h.mu.Lock()
	h.workers = append(h.workers, w)
	h.mu.Unlock()
	return w
}

func (h *wakeHandler) all() []*wakeWorker {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*wakeWorker(nil), h.workers...)
}

type wakeWorker struct {
	out      protocols.DatagramOut
	pending  atomic.Int64 // items queued by others
	consumed atomic.Int64 // items Woken took
	sent     uint32
	peer     atomic.Pointer[netip.AddrPort]
	buf      [1024]byte

	draining atomic.Bool
	bye      atomic.Bool // the peer said bye after the drain began
	drains   atomic.Int32
}

// queue is what another goroutine does: add an item, then Wake.
func (w *wakeWorker) queue() {
	w.pending.Add(1)
	w.out.Wake()
}

func (w *wakeWorker) Datagrams(batch []protocols.Datagram, now time.Time) {
	for _, d := range batch {
		p := d.Peer
		w.peer.Store(&p)
		if w.draining.Load() && string(d.Data[dgHeader:]) == "bye" {
			w.bye.Store(true)
		}
	}
}

func (w *wakeWorker) Woken(now time.Time) {
	n := w.pending.Swap(0)
	peer := w.peer.Load()
	for range n {
		w.sent++
		if peer != nil {
			binary.BigEndian.PutUint32(w.buf[:], w.sent)
			w.out.Send(*peer, w.buf[:])
		}
	}
	w.consumed.Add(n)
}

func (w *wakeWorker) Tick(now time.Time) time.Duration { return 0 }
func (w *wakeWorker) Close()                           {}
func (w *wakeWorker) Drain(now time.Time) {
	w.drains.Add(1)
	w.draining.Store(true)
}

// Drained: a worker that never heard from a peer has no session.
func (w *wakeWorker) Drained() bool { return w.bye.Load() || w.peer.Load() == nil }

// TestWakeNotLost: under every policy, two goroutines per worker queue
// 1,000 items each, one at a time, each waiting until its item was taken
// before queuing the next, while Woken sends a datagram per item (output
// that takes the worker a while, so Wakes land while it runs). A Wake
// lost between Woken's take and the clearing of the flag would strand an
// item: its producer would wait forever. Every item is taken, and the
// clients receive what Woken sent.
func TestWakeNotLost(t *testing.T) {
	const perProducer = 1000
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			h := &wakeHandler{}
			g := startGateway(t, dgConfig(t, policy, 2), Options{DatagramHandlers: map[string]protocols.DatagramHandler{"rudp": h}})
			var clients []*net.UDPConn
			buf := make([]byte, 64)
			addClient := func() {
				c := dgClient(t, g)
				c.Write(dgFrame(buf, uint64(len(clients)), 1, dgHeader))
				clients = append(clients, c)
			}
			for range 4 { // sessions 0..3 cover both workers
				addClient()
			}
			eventually(t, "workers see their peers", func() bool {
				ws := h.all()
				for _, w := range ws {
					if w.peer.Load() == nil {
						// Inline, the kernel's hash of the client's address
						// picks the loop and so the worker: all four may
						// land on one. Another client, until each has one.
						if len(clients) < 64 {
							addClient()
						}
						return false
					}
				}
				return len(ws) > 0
			})
			workers := h.all()
			var received atomic.Int64
			for _, c := range clients {
				go func() {
					b := make([]byte, 2048)
					for {
						if _, err := c.Read(b); err != nil {
							return // the test's cleanup closed it
						}
						received.Add(1)
					}
				}()
			}
			var wg sync.WaitGroup
			var stuck atomic.Int64
			for _, w := range workers {
				var mine sync.Mutex // producers of one worker take turns counting
				target := int64(0)
				for range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range perProducer {
							mine.Lock()
							target++
							want := target
							mine.Unlock()
							w.queue()
							deadline := time.Now().Add(20 * time.Second)
							for w.consumed.Load() < want {
								if time.Now().After(deadline) {
									stuck.Add(1)
									return
								}
								time.Sleep(20 * time.Microsecond)
							}
						}
					}()
				}
			}
			wg.Wait()
			if n := stuck.Load(); n > 0 {
				for i, w := range workers {
					t.Logf("worker %d: pending %d consumed %d", i, w.pending.Load(), w.consumed.Load())
				}
				t.Fatalf("%d producers waited 20 s for an item to be taken: a Wake was lost", n)
			}
			for i, w := range workers {
				if got := w.consumed.Load(); got != 2*perProducer {
					t.Errorf("worker %d took %d items, want %d", i, got, 2*perProducer)
				}
			}
			// What Woken sent went out through the shared port (how much
			// arrives is up to the clients' receive buffers).
			eventually(t, "datagrams from Woken received", func() bool { return received.Load() > 0 })
		})
	}
}

// TestDrainWaitsForDatagramSessions: Shutdown tells every datagram worker
// once (DatagramDrainer.Drain) and returns only after their sessions end
// (here: when the peer says bye), with no TCP connection open. A second
// gateway whose peers never say bye is cut when the grace ends.
func TestDrainWaitsForDatagramSessions(t *testing.T) {
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			h := &wakeHandler{}
			g := startGateway(t, dgConfig(t, policy, 2), Options{DatagramHandlers: map[string]protocols.DatagramHandler{"rudp": h}})
			c := dgClient(t, g)
			buf := make([]byte, 64)
			for s := range 4 { // sessions 0..3 cover both workers
				c.Write(dgFrame(buf, uint64(s), 1, dgHeader))
			}
			// Under inline the kernel's hash picks one loop for the
			// client's one socket: the other loop's worker has no session.
			eventually(t, "a session open", func() bool {
				for _, w := range h.all() {
					if w.peer.Load() != nil {
						return true
					}
				}
				return false
			})
			done := make(chan error, 1)
			go func() { done <- g.Shutdown(context.Background()) }()
			eventually(t, "every worker told", func() bool {
				ws := h.all()
				for _, w := range ws {
					if w.drains.Load() != 1 {
						return false
					}
				}
				return len(ws) > 0
			})
			select {
			case err := <-done:
				t.Fatalf("Shutdown returned (%v) while datagram sessions were open", err)
			case <-time.After(300 * time.Millisecond):
			}
			// Say bye to every worker (sessions 0..3 cover them all),
			// again and again until Shutdown returns: UDP may lose one.
			for seq := uint32(2); ; seq++ {
				for s := range 4 {
					f := dgFrame(buf, uint64(s), seq, dgHeader+3)
					copy(f[dgHeader:], "bye")
					c.Write(f)
				}
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("Shutdown: %v", err)
					}
					for i, w := range h.all() {
						if n := w.drains.Load(); n != 1 {
							t.Errorf("worker %d drained %d times", i, n)
						}
					}
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
		t.Run(policy+"/grace", func(t *testing.T) {
			h := &wakeHandler{}
			g := startGateway(t, dgConfig(t, policy, 2), Options{DatagramHandlers: map[string]protocols.DatagramHandler{"rudp": h}})
			c := dgClient(t, g)
			c.Write(dgFrame(make([]byte, 64), 1, 1, dgHeader))
			eventually(t, "a session open", func() bool {
				for _, w := range h.all() {
					if w.peer.Load() != nil {
						return true
					}
				}
				return false
			})
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			if err := g.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Shutdown = %v, want the grace's deadline: sessions never ended", err)
			}
		})
	}
}
