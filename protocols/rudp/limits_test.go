package rudp

import (
	"errors"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// TestFlowControl: a server application that does not read stops the
// client at the receive window (nothing is sent past it, nothing
// dropped), the client's queue fills to its bound, and everything flows
// in order once the application reads again.
func TestFlowControl(t *testing.T) {
	s := newSim(t, 41, Config{}, noImpairment())
	var got [][]byte
	s.onServerMessage = func(_ *Conn, m []byte) { got = append(got, m) }
	s.paused = true
	c := s.addClient(Config{})
	s.established()
	sent := 0
	var full error
	for ; sent < 1000; sent++ {
		if full = c.Send(testMessage(0, sent)); full != nil {
			break
		}
	}
	if !errors.Is(full, ErrQueueFull) {
		t.Fatalf("1000 messages queued without backpressure (%v)", full)
	}
	s.runUntil(s.now.Add(10*time.Second), nil)
	sc := s.ep.Session(c.ID())
	if sc.rcv.nxt-sc.rcv.base > sc.rcv.window || sc.Stats().OutOfWindow != 0 {
		t.Fatalf("receiver holds %d fragments of a %d window, %d out of window", sc.rcv.nxt-sc.rcv.base, sc.rcv.window, sc.Stats().OutOfWindow)
	}
	if c.snd.nxt < uint64(sc.rcv.window)-1 || c.snd.nxt > c.peerLimit {
		t.Fatalf("sender at %d, window limit %d", c.snd.nxt, c.peerLimit)
	}
	s.paused = false
	s.readAll()
	s.app = func(time.Time) {
		for sent < 1000 && c.Send(testMessage(0, sent)) == nil {
			sent++
		}
	}
	s.runUntil(s.now.Add(time.Minute), func() bool { return len(got) == 1000 })
	if err := checkStream(got, 0, 1000); err != nil {
		t.Fatal(err)
	}
}

// TestRandomLossIsNotCongestion: 10 % random loss leaves the congestion
// window where it was; loss-based control would have halved it many times.
func TestRandomLossIsNotCongestion(t *testing.T) {
	net := lossy.Config{Up: lossy.Impairment{Loss: 0.1, Delay: 10 * time.Millisecond}, Down: lossy.Impairment{Delay: 10 * time.Millisecond}}
	st := newStream(t, 42, net, 2000, time.Millisecond)
	st.finish(2000)
	if cw := st.c.cc.cwnd; cw < ccInitialWindow*st.c.maxDatagram {
		t.Fatalf("cwnd %d after random loss, below the initial %d", cw, ccInitialWindow*st.c.maxDatagram)
	}
	if st.c.Stats().Retransmits == 0 {
		t.Fatal("no loss happened")
	}
}

// TestDelayBoundsTheQueue: over a 1 MB/s bottleneck, a bulk sender keeps
// the bottleneck's queue short (delay-based control) and still fills the
// link.
func TestDelayBoundsTheQueue(t *testing.T) {
	link := lossy.Impairment{Delay: 10 * time.Millisecond, Rate: 1 << 20}
	net := lossy.Config{Up: link, Down: lossy.Impairment{Delay: 10 * time.Millisecond}}
	s := newSim(t, 43, Config{}, net)
	received := 0
	s.onServerMessage = func(_ *Conn, m []byte) { received += len(m) }
	c := s.addClient(Config{})
	s.established()
	msg := make([]byte, 1000)
	s.app = func(time.Time) {
		for c.Send(msg) == nil {
		}
	}
	s.app(s.now)
	s.flush()
	start := s.now
	var worst time.Duration
	for s.now.Before(start.Add(20 * time.Second)) {
		s.step(start.Add(20 * time.Second))
		if s.now.Sub(start) > 5*time.Second {
			worst = max(worst, c.rtt.latest)
		}
	}
	rate := float64(received) / s.now.Sub(start).Seconds()
	t.Logf("goodput %.0f KB/s over a 1024 KB/s link; min RTT %v, worst RTT after 5 s %v, cwnd %d", rate/1024, c.rtt.minRTT, worst, c.cc.cwnd)
	if worst > 2*c.rtt.minRTT+10*time.Millisecond {
		t.Fatalf("RTT grew to %v over a min of %v: the queue is not bounded", worst, c.rtt.minRTT)
	}
	if rate < 0.7*(1<<20) {
		t.Fatalf("goodput %.0f B/s, under 70 %% of the link", rate)
	}
}

// TestMemoryBudget: sessions together never hold more message buffers
// than the endpoint's budget; what does not fit is dropped and sent
// again, and arrives once the application reads.
func TestMemoryBudget(t *testing.T) {
	cfg := Config{MemoryBudget: 96 << 10, MaxMessage: 16 << 10, SendQueue: 64 << 10}
	s := newSim(t, 44, cfg, noImpairment())
	got := map[uint64][][]byte{}
	s.onServerMessage = func(c *Conn, m []byte) { got[c.ID()] = append(got[c.ID()], m) }
	s.paused = true
	for i := 0; i < 4; i++ {
		s.addClient(Config{})
	}
	s.established()
	for i, c := range s.clients {
		for k := 0; k < 40; k++ {
			if err := c.Send(testMessage(i, k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	peak := 0
	for end := s.now.Add(5 * time.Second); s.now.Before(end); {
		s.step(end)
		peak = max(peak, s.ep.Stats().MemoryInUse)
	}
	if peak > cfg.MemoryBudget || peak < cfg.MemoryBudget/2 {
		t.Fatalf("peak %d bytes held, budget %d", peak, cfg.MemoryBudget)
	}
	if err := s.ep.Session(s.clients[0].ID()).Send(make([]byte, 15<<10)); !errors.Is(err, ErrMemory) {
		t.Fatalf("a send past the budget: %v, want ErrMemory", err)
	}
	s.paused = false
	s.readAll()
	s.runUntil(s.now.Add(time.Minute), func() bool {
		s.readAll()
		for _, c := range s.clients {
			if len(got[c.ID()]) < 40 {
				return false
			}
		}
		return true
	})
	for i, c := range s.clients {
		if err := checkStream(got[c.ID()], i, 40); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMaxSessions: past the limit a client gets no session (and gives up
// after the handshake timeout); the others are unaffected.
func TestMaxSessions(t *testing.T) {
	s := newSim(t, 45, Config{MaxSessions: 3}, noImpairment())
	for i := 0; i < 5; i++ {
		s.addClient(Config{})
	}
	s.runUntil(s.now.Add(15*time.Second), nil)
	est, refused := 0, 0
	for _, c := range s.clients {
		switch {
		case c.State() == StateEstablished:
			est++
		case errors.Is(c.Err(), ErrHandshake):
			refused++
		}
	}
	if est != 3 || refused != 2 || s.ep.Stats().Sessions != 3 || s.ep.Stats().Refused == 0 {
		t.Fatalf("%d established, %d refused; %+v", est, refused, s.ep.Stats())
	}
}

// TestSharedBudget: endpoints sharing a budget hold, together, no more
// than it; what one frees, another may use.
func TestSharedBudget(t *testing.T) {
	shared := NewBudget(64 << 10)
	var eps [2]*Endpoint
	for i := range eps {
		ep, err := NewEndpoint(Config{}, EndpointOptions{Worker: i, Workers: 2, Budget: shared}, simStart)
		if err != nil {
			t.Fatal(err)
		}
		eps[i] = ep
	}
	p0 := &eps[0].pool
	var held [][]byte
	for {
		b, ok := p0.get(1000) // 1 KiB class
		if !ok {
			break
		}
		held = append(held, b)
	}
	if shared.InUse() != 64<<10 || eps[0].Stats().MemoryInUse != 64<<10 {
		t.Fatalf("in use %d, endpoint 0 holds %d", shared.InUse(), eps[0].Stats().MemoryInUse)
	}
	if _, ok := eps[1].pool.get(100); ok {
		t.Fatal("endpoint 1 took memory past the shared budget")
	}
	p0.put(held[0])
	if b, ok := eps[1].pool.get(1000); !ok || eps[1].Stats().MemoryInUse != 1024 {
		t.Fatalf("endpoint 1 cannot use what endpoint 0 gave back (%v)", ok)
	} else {
		eps[1].pool.put(b)
	}
	for _, b := range held[1:] {
		p0.put(b)
	}
	if shared.InUse() != 0 {
		t.Fatalf("%d bytes left in use", shared.InUse())
	}
}
