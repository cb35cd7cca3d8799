package rudp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// telemetryResult is one run of the telemetry load.
type telemetryResult struct {
	loss                 float64
	sent, delivered      int
	p50, p99, p999, pmax time.Duration
	wirePerPayload       float64 // all bytes on the wire, both ways, per payload byte delivered
	upPerPayload         float64 // client-to-server bytes per payload byte
}

// runTelemetry: sessions clients each send a 64-byte reliable message
// every 20 ms for dur over a path of 20 ms RTT with loss each way; the
// latency of a message is from Send to the server application reading it.
func runTelemetry(t testing.TB, loss float64, sessions int, dur time.Duration) telemetryResult {
	return runTelemetryTap(t, loss, sessions, dur, nil)
}

// runTelemetryTap is runTelemetry with tap seeing every datagram sent.
func runTelemetryTap(t testing.TB, loss float64, sessions int, dur time.Duration, tap func(up bool, b []byte)) telemetryResult {
	imp := lossy.Impairment{Loss: loss, Delay: 10 * time.Millisecond}
	if loss < 0 { // bursty: Gilbert-Elliott, about 10 % in runs of about 4
		imp.Loss = 0
		imp.Burst = &lossy.GilbertElliott{GoodToBad: 0.03, BadToGood: 0.25, LossGood: 0.0, LossBad: 0.9}
	}
	s := newSim(t, 51, Config{}, lossy.Config{Up: imp, Down: imp})
	s.tap = tap
	var lat []time.Duration
	last := map[uint64]uint32{}
	s.onServerMessage = func(c *Conn, m []byte) {
		seq := binary.BigEndian.Uint32(m[0:4])
		if prev, ok := last[c.ID()]; ok && seq != prev+1 || !ok && seq != 0 {
			t.Fatalf("session %d: message %d after %d", c.ID(), seq, prev)
		}
		last[c.ID()] = seq
		sentAt := time.Duration(binary.BigEndian.Uint64(m[4:12]))
		lat = append(lat, s.now.Sub(simStart)-sentAt)
	}
	for i := 0; i < sessions; i++ {
		s.addClient(Config{})
	}
	s.established()
	const interval = 20 * time.Millisecond
	next := make([]time.Time, sessions)
	seqs := make([]uint32, sessions)
	for i := range next {
		next[i] = s.now.Add(time.Duration(s.rng.Int64N(int64(interval))))
	}
	end := s.now.Add(dur)
	wake := func() time.Time {
		w := time.Time{}
		for _, n := range next {
			if n.Before(end) && (w.IsZero() || n.Before(w)) {
				w = n
			}
		}
		return w
	}
	s.wake = wake
	msg := make([]byte, 64)
	sent := 0
	s.app = func(now time.Time) {
		for i, c := range s.clients {
			for !next[i].After(now) && next[i].Before(end) {
				binary.BigEndian.PutUint32(msg[0:], seqs[i])
				binary.BigEndian.PutUint64(msg[4:], uint64(next[i].Sub(simStart)))
				if err := c.Send(msg); err != nil {
					t.Fatal(err)
				}
				seqs[i]++
				sent++
				next[i] = next[i].Add(interval)
			}
		}
	}
	before := s.net.Stats()
	s.runUntil(end.Add(30*time.Second), func() bool { return !s.now.Before(end) && len(lat) == sent })
	after := s.net.Stats()
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	payload := float64(len(lat) * len(msg))
	up := float64(after.Up.BytesSent - before.Up.BytesSent)
	down := float64(after.Down.BytesSent - before.Down.BytesSent)
	return telemetryResult{
		loss: loss, sent: sent, delivered: len(lat),
		p50: pct(0.50), p99: pct(0.99), p999: pct(0.999), pmax: lat[len(lat)-1],
		wirePerPayload: (up + down) / payload, upPerPayload: up / payload,
	}
}

func (r telemetryResult) String() string {
	name := fmt.Sprintf("loss %2.0f%%", r.loss*100)
	if r.loss < 0 {
		name = "bursty 10%" // the Gilbert-Elliott model's mean: 0.9 * 0.03 / 0.28
	}
	return fmt.Sprintf("%s: delivered %d/%d (%.2f%%), p50 %v, p99 %v, p99.9 %v, max %v, wire/payload %.2fx (client->server %.2fx)",
		name, r.delivered, r.sent, 100*float64(r.delivered)/float64(r.sent), r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond),
		r.p999.Round(100*time.Microsecond), r.pmax.Round(100*time.Microsecond), r.wirePerPayload, r.upPerPayload)
}

// TestTelemetryLatency is the latency load: 50 sessions sending
// 64 B every 20 ms at 20 ms RTT with 5, 10 and 20 % loss each way, for a
// minute of virtual time, and over bursty loss of about 10 %. Every
// message must arrive, in order; the
// figures print with -v (the README's table comes from here).
func TestTelemetryLatency(t *testing.T) {
	dur := time.Minute
	if raceEnabled || testing.Short() {
		dur = 3 * time.Second // the race detector, and 32-bit ARM under qemu
	}
	var clean float64
	for _, loss := range []float64{0, 0.05, 0.10, 0.20, -1} {
		r := runTelemetry(t, loss, 50, dur)
		if loss == 0 {
			clean = r.wirePerPayload
		}
		t.Logf("%v; %.2fx the bytes of the lossless run", r, r.wirePerPayload/clean)
		if r.delivered != r.sent {
			t.Errorf("loss %.0f%%: %d of %d delivered", loss*100, r.delivered, r.sent)
		}
		// The goals, on this seeded virtual run (a regression guard, not a
		// wall-clock measurement).
		if goal := map[float64]time.Duration{0.10: 80 * time.Millisecond, 0.20: 150 * time.Millisecond}[loss]; goal != 0 && r.p99 > goal && dur == time.Minute {
			t.Errorf("loss %.0f%%: p99 %v over the goal of %v", loss*100, r.p99, goal)
		}
	}
}
