package lossy

import (
	"math"
	"net/netip"
	"testing"
	"time"
)

var (
	server = netip.MustParseAddrPort("10.0.0.1:5020")
	client = netip.MustParseAddrPort("10.1.0.1:4000")
	t0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// run sends n datagrams up, one per millisecond, and returns what arrived
// (by first byte pair, the index) and when.
func run(t *testing.T, n *Network, count int) (got []int, at []time.Duration) {
	t.Helper()
	now := t0
	for i := 0; i < count; i++ {
		n.Send(client, server, []byte{byte(i >> 8), byte(i), 0xAA}, now)
		now = now.Add(time.Millisecond)
		n.Deliver(now, func(from, to netip.AddrPort, b []byte) {
			got = append(got, int(b[0])<<8|int(b[1]))
			at = append(at, now.Sub(t0))
		})
	}
	end := now.Add(time.Hour)
	n.Deliver(end, func(from, to netip.AddrPort, b []byte) {
		got = append(got, int(b[0])<<8|int(b[1]))
	})
	return got, at
}

func TestBernoulliLossAndCounts(t *testing.T) {
	n := New(Config{Seed: 1, Server: server, Up: Impairment{Loss: 0.2}})
	got, _ := run(t, n, 20000)
	st := n.Stats().Up
	rate := float64(st.Lost) / float64(st.Sent)
	if math.Abs(rate-0.2) > 0.02 || int(st.Delivered) != len(got) || st.Sent != 20000 || st.BytesSent != 60000 || st.BytesDelivered != 3*st.Delivered {
		t.Fatalf("loss %.3f, %+v, %d delivered", rate, st, len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatal("reordered without reordering configured")
		}
	}
}

func TestGilbertElliottIsBursty(t *testing.T) {
	g := &GilbertElliott{GoodToBad: 0.02, BadToGood: 0.2, LossGood: 0, LossBad: 0.8}
	n := New(Config{Seed: 2, Server: server, Up: Impairment{Burst: g}})
	got, _ := run(t, n, 50000)
	st := n.Stats().Up
	pi := g.GoodToBad / (g.GoodToBad + g.BadToGood)
	want := g.LossBad * pi
	rate := float64(st.Lost) / float64(st.Sent)
	if math.Abs(rate-want) > 0.015 {
		t.Fatalf("loss %.3f, want about %.3f", rate, want)
	}
	// Losses come in runs: the mean gap run is much longer than 1/(1-p)
	// would make it for independent losses.
	runs, lost := 0, 0
	for i := 1; i < len(got); i++ {
		if d := got[i] - got[i-1] - 1; d > 0 {
			runs++
			lost += d
		}
	}
	if mean := float64(lost) / float64(runs); mean < 1.8 {
		t.Fatalf("mean loss run %.2f: not bursty", mean)
	}
}

func TestDelayJitterReorderDuplicateCorrupt(t *testing.T) {
	imp := Impairment{Delay: 10 * time.Millisecond, Jitter: 2 * time.Millisecond, Reorder: 0.1, ReorderDelay: 20 * time.Millisecond, Duplicate: 0.1, Corrupt: 0.1}
	n := New(Config{Seed: 3, Server: server, Up: imp})
	var corrupted int
	now := t0
	var got []int
	for i := 0; i < 5000; i++ {
		n.Send(client, server, []byte{byte(i >> 8), byte(i), 0xAA}, now)
		now = now.Add(time.Millisecond)
		n.Deliver(now, func(from, to netip.AddrPort, b []byte) {
			if b[2] != 0xAA {
				corrupted++
				return
			}
			got = append(got, int(b[0])<<8|int(b[1]))
		})
	}
	st := n.Stats().Up
	if st.Duplicated < 400 || st.Reordered < 400 || st.Corrupted < 400 || st.Delivered != 5000+st.Duplicated-uint64(countPending(n)) {
		t.Fatalf("%+v", st)
	}
	misordered := 0
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			misordered++
		}
	}
	if misordered == 0 || corrupted == 0 {
		t.Fatalf("%d misordered, %d corrupted", misordered, corrupted)
	}
	if d, ok := n.Next(); !ok || d.Before(now) {
		t.Fatalf("next %v", d)
	}
}

func countPending(n *Network) int { return len(n.queue) }

func TestBlackoutAndRebinding(t *testing.T) {
	n := New(Config{Seed: 4, Server: server})
	n.Blackout(t0.Add(time.Second), t0.Add(2*time.Second))
	n.Send(client, server, []byte("in"), t0.Add(1500*time.Millisecond))
	if n.Stats().Up.Blackholed != 1 {
		t.Fatal("sent during a blackout and not dropped")
	}
	old := n.Outside(client)
	fresh := n.Rebind(client)
	if fresh == old || n.Outside(client) != fresh {
		t.Fatalf("rebinding: %v -> %v", old, fresh)
	}
	var from netip.AddrPort
	n.Send(client, server, []byte("up"), t0.Add(3*time.Second))
	n.Send(server, old, []byte("to the old mapping"), t0.Add(3*time.Second))
	n.Send(server, fresh, []byte("to the new one"), t0.Add(3*time.Second))
	var down []string
	n.Deliver(t0.Add(4*time.Second), func(f, to netip.AddrPort, b []byte) {
		if to == server {
			from = f
		} else if to == client {
			down = append(down, string(b))
		}
	})
	if from != fresh || len(down) != 1 || down[0] != "to the new one" || n.Stats().NATDrops != 1 {
		t.Fatalf("from %v, down %q, %d NAT drops", from, down, n.Stats().NATDrops)
	}
}

func TestRate(t *testing.T) {
	n := New(Config{Seed: 5, Server: server, Up: Impairment{Rate: 1000}}) // 1000 B/s
	for i := 0; i < 10; i++ {
		n.Send(client, server, make([]byte, 100), t0)
	}
	var last time.Time
	n.Deliver(t0.Add(time.Hour), func(_, _ netip.AddrPort, _ []byte) {})
	last, _ = n.Next()
	if !last.IsZero() {
		t.Fatal("datagrams left")
	}
	n.Send(client, server, make([]byte, 100), t0)
	at, _ := n.Next()
	if got := at.Sub(t0); got != 1100*time.Millisecond {
		t.Fatalf("the 11th 100-byte datagram at 1000 B/s arrives after %v, want 1.1 s", got)
	}
}
