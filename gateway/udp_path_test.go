package gateway

// The datagram path through real sockets: datagrams reach the worker that
// owns their session, in order, whole; handlers answer through sendmmsg;
// truncated ones are counted and dropped.

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/edgemux/edgemux/sniff"
)

// TestDatagramsOfASessionReachOneWorker: 24 sessions, each sending from
// two sockets (as a client behind a NAT that rebinds its port would), in
// rounds: every datagram of a session reaches the worker its handler's
// Route names, whichever loop's socket took it, in order per peer and
// whole; every worker gets its share, and /metrics counts them all. Under
// the inline policy the loops run the workers and Route is not asked:
// each socket's datagrams stay on one loop (the kernel's reuseport hash).
func TestDatagramsOfASessionReachOneWorker(t *testing.T) {
	const sessions, rounds, perRound, workers = 24, 10, 10, 3
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			h := &dgHandler{}
			g := dgStart(t, dgConfig(t, policy, workers), h)
			var peers []*net.UDPConn
			for range 2 * sessions {
				peers = append(peers, dgClient(t, g))
			}
			buf := make([]byte, 512)
			sent := 0
			for round := range rounds {
				for k := range perRound {
					for i, c := range peers {
						seq := uint32(round*perRound + k + 1)
						if _, err := c.Write(dgFrame(buf, uint64(i/2), seq, dgHeader+(i*13+k)%400)); err != nil {
							t.Fatal(err)
						}
						sent++
					}
				}
				eventually(t, "the round handled", func() bool { return h.seen().handled == sent })
			}
			s := h.seen()
			for _, p := range s.problems {
				t.Error(p)
			}
			if policy != "inline" {
				for id, on := range s.sessions {
					if len(on) != 1 {
						t.Errorf("session %d reached workers %v, want one", id, on)
					}
				}
				// Route is session % workers: 8 sessions, 16 peers each.
				for i := range workers {
					if want := sent / workers; s.perIndex[i] != want {
						t.Errorf("worker %d handled %d, want %d (all: %v)", i, s.perIndex[i], want, s.perIndex)
					}
				}
			}
			m := httpGet(t, g, "/metrics")
			if got := metricSum(t, m, "edgemux_worker_datagrams_total"); got != float64(sent) {
				t.Errorf("edgemux_worker_datagrams_total sums to %v, want %d", got, sent)
			}
			if got := metric(m, `edgemux_datagrams_total{class="rudp"}`); got != strconv.Itoa(sent) {
				t.Errorf(`edgemux_datagrams_total{class="rudp"} = %s, want %d`, got, sent)
			}
		})
	}
}

// TestDatagramEchoThroughSendmmsg: a handler that sends every datagram
// back: each client gets its own datagrams back, whole and in order,
// through the workers' sendmmsg batches from the shared port.
func TestDatagramEchoThroughSendmmsg(t *testing.T) {
	const clients, total, window = 4, 300, 30
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			h := &dgHandler{echo: true}
			g := dgStart(t, dgConfig(t, policy, 2), h)
			errs := make(chan error, clients)
			for i := range clients {
				c := dgClient(t, g)
				go func() { errs <- echoClient(c, uint64(i), total, window) }()
			}
			for range clients {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			for _, p := range h.seen().problems {
				t.Error(p)
			}
			// The clients may read the last echoes before the worker
			// has counted them.
			eventually(t, "every echo counted", func() bool { return g.udpStats.sent.Load() == clients*total })
			m := httpGet(t, g, "/metrics")
			if got := metric(m, "edgemux_datagrams_sent_total"); got != strconv.Itoa(clients*total) {
				t.Errorf("edgemux_datagrams_sent_total = %s, want %d", got, clients*total)
			}
		})
	}
}

// echoClient sends total datagrams of session in windows and reads each
// window's echoes back, which must be the datagrams sent, in order.
func echoClient(c *net.UDPConn, session uint64, total, window int) error {
	out, in := make([]byte, 2048), make([]byte, 4096)
	for base := 0; base < total; base += window {
		var sent [][]byte
		for k := range window {
			seq := uint32(base + k + 1)
			d := dgFrame(out, session, seq, dgHeader+int(seq*37)%1200)
			sent = append(sent, bytes.Clone(d))
			if _, err := c.Write(d); err != nil {
				return err
			}
		}
		for _, want := range sent {
			c.SetReadDeadline(time.Now().Add(rbIOTimeout))
			n, err := c.Read(in)
			if err != nil {
				return err
			}
			if !bytes.Equal(in[:n], want) {
				_, seq, _ := dgParse(in[:n])
				_, wantSeq, _ := dgParse(want)
				return fmt.Errorf("session %d: echo of seq %d (%d bytes), want seq %d (%d bytes)", session, seq, n, wantSeq, len(want))
			}
		}
	}
	return nil
}

// TestDatagramTruncatedCountedAndDropped: a datagram longer than
// udp.max_datagram reaches the gateway cut (MSG_TRUNC); it is counted and
// dropped, never handed to a handler, while one of exactly max_datagram
// bytes and a shorter one are.
func TestDatagramTruncatedCountedAndDropped(t *testing.T) {
	cfg := dgConfig(t, "entropy", 1)
	cfg.UDP.MaxDatagram = 256
	cfg.RUDP.MaxDatagram, cfg.RUDP.MaxMessage = 256, 16<<10 // it may not send more than the port receives
	h := &dgHandler{}
	g := dgStart(t, cfg, h)
	c := dgClient(t, g)
	buf := make([]byte, 512)
	for i, size := range []int{300, 256, 100} {
		if _, err := c.Write(dgFrame(buf, 7, uint32(i+1), size)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "two handled and one counted", func() bool {
		return h.seen().handled == 2 && g.udpStats.drops[dropTruncated].Load() == 1
	})
	s := h.seen()
	for _, p := range s.problems {
		t.Error(p) // a truncated datagram handed over fails dgParse's length check
	}
	h.mu.Lock()
	sizes := h.workers[0].sizes
	h.mu.Unlock()
	if len(sizes) != 2 || sizes[0] != 256 || sizes[1] != 100 {
		t.Errorf("handled sizes %v, want [256 100]", sizes)
	}
	m := httpGet(t, g, "/metrics")
	if got := metric(m, `edgemux_datagram_drops_total{reason="truncated"}`); got != "1" {
		t.Errorf(`edgemux_datagram_drops_total{reason="truncated"} = %q, want 1`, got)
	}
}

// TestBatchEntriesNeverLookLikeConnections: a ring entry naming a batch
// and one naming a connection cannot be taken for each other, at the
// extremes of fd, generation and batch index.
func TestBatchEntriesNeverLookLikeConnections(t *testing.T) {
	for _, fd := range []int{0, 1, 1 << 20, math.MaxInt32} {
		for _, gen := range []uint32{0, 1, math.MaxUint32} {
			if e := connEntry(fd, gen); isBatch(e) {
				t.Errorf("connection (%d, %d) = %#x reads as a batch", fd, gen, e)
			}
		}
	}
	for _, i := range []int{0, 1, 1023} {
		e := batchEntry(i)
		if !isBatch(e) || batchIndex(e) != i {
			t.Errorf("batch %d = %#x: isBatch %v, index %d", i, e, isBatch(e), batchIndex(e))
		}
	}
}

// TestDatagramClassesCounted: numClasses covers every class sniff reports,
// so no class indexes past the gateway's per-class tables.
func TestDatagramClassesCounted(t *testing.T) {
	if got := sniff.DatagramClass(numClasses).String(); got != "invalid" {
		t.Errorf("sniff knows datagram class %d (%s): numClasses is %d", numClasses, got, numClasses)
	}
	for c := range numClasses {
		if got, ok := parseDatagramClass(sniff.DatagramClass(c).String()); !ok || int(got) != c {
			t.Errorf("class %d: parsed as %d, %v", c, got, ok)
		}
	}
}

// TestDatagramHandlerPanics: a handler's Route that panics costs that
// datagram (counted as a route drop), a Datagrams that panics costs that
// call; both are counted as handler panics, and the loop and the worker
// live on: what comes next is handled.
func TestDatagramHandlerPanics(t *testing.T) {
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			h := &dgHandler{panicRoute: 13, panicData: 14}
			g := dgStart(t, dgConfig(t, policy, 2), h)
			c := dgClient(t, g)
			buf := make([]byte, 64)
			send := func(session uint64, seq uint32) {
				if _, err := c.Write(dgFrame(buf, session, seq, 64)); err != nil {
					t.Fatal(err)
				}
			}
			panics := func() string { return metric(httpGet(t, g, "/metrics"), "edgemux_handler_panics_total") }
			send(1, 1)
			eventually(t, "the first handled", func() bool { return h.seen().handled == 1 })
			send(13, 2)
			if policy != "inline" {
				eventually(t, "the Route panic counted", func() bool {
					return g.udpStats.drops[dropRoute].Load() == 1 && panics() == "1"
				})
			} else { // inline asks no Route: it is handled
				eventually(t, "session 13 handled", func() bool { return h.seen().handled == 2 })
			}
			send(14, 3)
			eventually(t, "the Datagrams panic counted", func() bool {
				want := "2"
				if policy == "inline" {
					want = "1"
				}
				return panics() == want
			})
			send(2, 4)
			send(1, 5)
			handled := 3
			if policy == "inline" {
				handled = 4 // session 13's datagram too
			}
			eventually(t, "what came next handled", func() bool { return h.seen().handled == handled })
			for _, p := range h.seen().problems {
				t.Error(p)
			}
		})
	}
}
