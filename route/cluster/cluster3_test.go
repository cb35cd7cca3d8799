package cluster

import (
	"testing"
	"time"

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
	busC := newBus()
	var lc *Link
	eventually(t, "C joins with one node down", func() bool {
		var err error
		lc, err = Start(busC, opt("gw-c"))
		return err == nil
	})
	t.Cleanup(lc.Close)
	for topic, want := range map[string]string{"three/x": "1", "three/y": "2"} {
		if m, ok := busC.Get(topic); !ok || string(m.Payload) != want {
			t.Errorf("C's %s = %q (%v), want %s", topic, m.Payload, ok, want)
		}
	}
}
