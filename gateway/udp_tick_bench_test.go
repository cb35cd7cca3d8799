package gateway

// How close to its deadline a datagram handler's Tick comes, through a
// running gateway: the handler asks for a Tick every 2 ms (a
// retransmission timer) and records how late each one is.
//
//	go test -run '^$' -bench BenchmarkDatagramTick -benchtime 2000x ./gateway/

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols"
)

// tickWaiter asks for a Tick every wait and records, until it has n, how
// late each came; done is closed then.
type tickWaiter struct {
	wait time.Duration
	late []time.Duration
	n    int
	prev time.Time
	done chan struct{}
}

func (h *tickWaiter) Route(netip.AddrPort, []byte, int) int { return 0 }
func (h *tickWaiter) Worker(_, _ int, _ protocols.DatagramOut) protocols.DatagramWorker {
	return h
}
func (h *tickWaiter) Datagrams([]protocols.Datagram, time.Time) {}
func (h *tickWaiter) Close()                                    {}
func (h *tickWaiter) Tick(now time.Time) time.Duration {
	if !h.prev.IsZero() && len(h.late) < h.n {
		h.late = append(h.late, now.Sub(h.prev.Add(h.wait)))
		if len(h.late) == h.n {
			close(h.done)
		}
	}
	h.prev = now
	return h.wait
}

func BenchmarkDatagramTick(b *testing.B) {
	for _, policy := range []string{"entropy", "inline"} {
		b.Run(policy, func(b *testing.B) {
			cfg := dgConfig(b, policy, 1)
			cfg.Loops = 1
			h := &tickWaiter{wait: 2 * time.Millisecond, n: b.N, done: make(chan struct{})}
			g, err := New(cfg, Options{DatagramHandlers: map[string]protocols.DatagramHandler{"rudp": h}})
			if err != nil {
				b.Fatal(err)
			}
			go g.Run(b.Context())
			<-g.Ready()
			<-h.done
			g.Close()
			<-g.done
			slices.Sort(h.late)
			q := func(p float64) float64 { return float64(h.late[int(p*float64(len(h.late)-1))]) / 1e3 }
			b.ReportMetric(q(0.5), "late-p50-us")
			b.ReportMetric(q(0.99), "late-p99-us")
			b.ReportMetric(q(1), "late-max-us")
		})
	}
}
