package cluster

import (
	"strconv"
	"testing"
	"time"

	"github.com/edgemux/edgemux/route/cluster/natstest"
)

// BenchmarkMirrorAToB: messages/s from a publish on bus A to their
// arrival on bus B through one nats-server (file storage), 16-byte
// payloads over 100 topics. Each message is stored in the KV stream and
// delivered to B's subscription.
func BenchmarkMirrorAToB(b *testing.B) {
	srv := natstest.Start(b)
	busA, busB := newBus(), newBus()
	la, err := Start(busA, Options{URLs: []string{srv.URL()}, GatewayID: "bench-a", Bucket: "edgemux", Prefix: "edgemux", MaxPending: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer la.Close()
	lb, err := Start(busB, Options{URLs: []string{srv.URL()}, GatewayID: "bench-b", Bucket: "edgemux", Prefix: "edgemux", MaxPending: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer lb.Close()
	topics := make([]string, 100)
	for i := range topics {
		topics[i] = "bench/t" + strconv.Itoa(i)
	}
	payload := []byte("0123456789abcdef")
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		if err := busA.Publish(topics[i%len(topics)], payload, "bench"); err != nil {
			b.Fatal(err)
		}
		// Pace to what the link takes: a publisher never blocks, so an
		// unpaced loop would only measure queue drops.
		for i-int(lb.Stats().Received) > 50000 {
			time.Sleep(time.Millisecond)
		}
	}
	for lb.Stats().Received+la.Stats().Dropped < uint64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(lb.Stats().Received)/time.Since(start).Seconds(), "msgs/s")
	if d := la.Stats().Dropped; d > 0 {
		b.ReportMetric(float64(d), "dropped")
	}
}
