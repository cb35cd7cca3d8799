package gateway

// Shutdown and Close while datagrams flow both ways, under every dispatch
// policy: every DatagramWorker is closed exactly once, none is called
// after, and afterwards no fd (the UDP sockets among them) or goroutine of
// the gateway's is left.

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/sniff"
)

func TestStopWithDatagramsFlowing(t *testing.T) {
	for _, policy := range everyPolicy {
		for _, how := range []string{"shutdown", "close"} {
			t.Run(policy+"/"+how, func(t *testing.T) {
				stopWithDatagramsFlowing(t, policy, how)
			})
		}
	}
}

func stopWithDatagramsFlowing(t *testing.T, policy, how string) {
	fds, goroutines := baseline(t)
	cfg := dgConfig(t, policy, 2)
	h := &dgHandler{echo: true, inline: policy == "inline"}
	g, err := New(cfg, Options{DatagramHandlers: map[string]protocols.DatagramHandler{"rudp": h}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	<-g.Ready()

	stop := make(chan struct{})
	var clients sync.WaitGroup
	var echoes sync.Map // client -> echoes read
	for i := range 4 {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(g.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		clients.Add(1)
		go func() {
			defer clients.Done()
			defer c.Close()
			out, in := make([]byte, 256), make([]byte, 256)
			n := 0
			for seq := uint32(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				c.Write(dgFrame(out, uint64(i), seq, 100)) // refused once the gateway is gone
				c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
				if _, err := c.Read(in); err == nil {
					n++
					echoes.Store(i, n)
				}
			}
		}()
	}
	eventually(t, "echoes flowing to every client", func() bool {
		k := 0
		echoes.Range(func(_, n any) bool {
			if n.(int) >= 20 {
				k++
			}
			return true
		})
		return k == 4
	})
	switch how {
	case "shutdown":
		ctx, cancel := context.WithTimeout(context.Background(), rbIOTimeout)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case "close":
		g.Close()
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	close(stop)
	clients.Wait()

	s := h.seen()
	if want := 2; s.workers != want { // two pool workers, or two loops running theirs
		t.Errorf("%d DatagramWorkers made, want %d", s.workers, want)
	}
	for i, n := range s.closes {
		if n != 1 {
			t.Errorf("DatagramWorker %d closed %d times, want once", i, n)
		}
	}
	for _, p := range s.problems {
		t.Error(p) // a call after Close among them
	}
	expectReleased(t, g, fds, goroutines)
}

// tickRecorder is a DatagramWorker whose Tick returns the waits it is
// given, one per call, and records when it was called.
type tickRecorder struct {
	waits []time.Duration
	calls []time.Time
}

func (r *tickRecorder) Datagrams([]protocols.Datagram, time.Time) {}
func (r *tickRecorder) Close()                                    {}
func (r *tickRecorder) Tick(now time.Time) time.Duration {
	r.calls = append(r.calls, now)
	w := r.waits[0]
	r.waits = r.waits[1:]
	return w
}

// TestDatagramTickDeadlines: a worker calls a datagram handler's Tick when
// the wait it asked for has passed, or when the handler was given
// datagrams since (they may have armed a timer), and not otherwise; it
// may park until the earliest deadline, never longer than quietWait. No
// wait (0) or a longer one means quietWait.
func TestDatagramTickDeadlines(t *testing.T) {
	rec := &tickRecorder{waits: []time.Duration{3 * time.Millisecond, 0, 2 * quietWait, 7 * time.Millisecond}}
	d := &dgramWorker{out: &dgramOut{}, opened: true}
	c := sniff.DatagramRUDP
	d.dws[c] = rec
	t0 := time.Now()
	d.due[c] = t0
	ms := time.Millisecond
	steps := []struct {
		at      time.Duration
		touched bool
		calls   int           // Tick calls so far
		park    time.Duration // what tick returns
	}{
		{0, false, 1, 3 * ms},                                                  // due: Tick asks for 3 ms
		{1 * ms, false, 1, 2 * ms},                                             // not due: park the 2 ms left
		{3 * ms, false, 2, quietWait},                                          // due: Tick asks for nothing
		{50 * ms, false, 2, quietWait - 47*ms},                                 // not due
		{60 * ms, true, 3, quietWait},                                          // datagrams came: Tick asks for 2 s, capped
		{60*ms + quietWait, false, 4, 7 * ms},                                  // due: Tick asks for 7 ms
		{66*ms + quietWait + 999*time.Microsecond, false, 4, time.Microsecond}, // 1 µs before the deadline
	}
	for i, st := range steps {
		if st.touched {
			d.touched |= 1 << c
		}
		park := d.tick(t0.Add(st.at))
		if len(rec.calls) != st.calls || park != st.park {
			t.Fatalf("step %d (at %v): %d Tick calls, park %v; want %d, %v", i, st.at, len(rec.calls), park, st.calls, st.park)
		}
	}
}
