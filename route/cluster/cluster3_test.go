package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgemux/edgemux/route/cluster/natstest"
)

// TestThreeNodeCluster: two buses on a three-node NATS cluster, the
// bucket kept on three nodes; a value crosses, one node goes away, values
// keep crossing, and a bus joining after that loads them.
func TestThreeNodeCluster(t *testing.T) {
	nodes := natstest.StartCluster(t, 3)
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.URL())
	}
	opt := func(id string) Options {
		return Options{URLs: urls, GatewayID: id, Bucket: "edgemux", Prefix: "edgemux", Replicas: 3, ConnectTimeout: 10 * time.Second}
	}
	busA, busB := newBus(), newBus()
	var la *Link
	// JetStream answers once the nodes have elected their leader.
	eventually(t, "A joins once JetStream is up", func() bool {
		var err error
		la, err = Start(busA, opt("gw-a"))
		return err == nil
	})
	t.Cleanup(la.Close)
	lb, err := Start(busB, opt("gw-b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.Close)
	if err := busA.Publish("three/x", []byte("1"), "ws"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B has three/x=1", func() bool { m, ok := busB.Get("three/x"); return ok && string(m.Payload) == "1" })

	nodes[0].Stop() // A or B may have been on it: they move to another node
	eventually(t, "a value crosses with one node down", func() bool {
		_ = busA.Publish("three/y", []byte("2"), "ws")
		m, ok := busB.Get("three/y")
		return ok && string(m.Payload) == "2"
	})
	want := map[string]string{"three/x": "1", "three/y": "2"}
	waitForStored(t, urls, "edgemux", want)
	busC := newBus()
	var lc *Link
	var lastErr string
	eventually(t, "C joins with one node down", func() bool {
		var err error
		lc, err = Start(busC, opt("gw-c"))
		if err != nil && err.Error() != lastErr {
			lastErr = err.Error()
			t.Logf("C's start: %v", err) // what a give-up was waiting for
		}
		return err == nil
	})
	t.Cleanup(lc.Close)
	for topic, value := range want {
		if m, ok := busC.Get(topic); !ok || string(m.Payload) != value {
			t.Errorf("C's %s = %q (%v), want %s", topic, m.Payload, ok, value)
		}
	}
}

// waitForStored waits until the bucket holds each topic's value, read
// from JetStream itself, and a consumer can read the bucket as a join
// does. After a node is killed its raft groups (the cluster's metadata,
// the bucket's stream) elect new leaders, and until they have, JetStream
// requests time out: a publish meanwhile is stored only when the link
// sends it again, and a join waits out its whole connect timeout, try
// after try (10 s each here; on a loaded CI machine more than the minute
// eventually allows). The value crossing above shows none of it: it
// travels on a plain subject too, so B had three/y before the bucket did,
// and a join that came first loaded no three/y.
func waitForStored(t *testing.T, urls []string, bucket string, want map[string]string) {
	t.Helper()
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bucket holds every value", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			return false
		}
		for topic, value := range want {
			e, err := kv.Get(ctx, "v."+Tokens(topic))
			if err != nil || string(e.Value()) != value {
				return false
			}
		}
		// A join reads the bucket through an ordered consumer, which
		// the metadata leader has to create: read one value so too.
		stream, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return false
		}
		cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{MaxResetAttempts: 1})
		if err != nil {
			return false
		}
		_, err = cons.Next(jetstream.FetchMaxWait(time.Second))
		return err == nil
	})
}
