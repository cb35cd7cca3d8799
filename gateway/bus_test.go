package gateway

// The bus through the real gateway and sockets: bursts arrive whole, a
// retained replay never stalls the other connections of its worker, and
// what is dropped anyway is told to the subscriber in-band and counted.

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

// TestBurstReachesPrivateSubscriber: 10,000 PUBs of 64 bytes sent in one
// TCP write reach a subscriber that keeps reading, complete and in order,
// under the default queue settings, whether publisher and subscriber
// share a worker (its inbox must not wait for the whole burst) or not.
func TestBurstReachesPrivateSubscriber(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			cfg := rbConfig(t)
			btWorkers(&cfg, "private", workers)
			btPrivateBurst(t, cfg)
		})
	}
}

// TestBurstIsDeliveredAsItIsRead: the worker delivers what each read of
// a burst published before it reads on, so a subscriber on the same
// worker needs a queue of about one read (64 KiB, some 660 of these
// messages), not of the whole burst: 3,000 messages suffice for 10,000.
func TestBurstIsDeliveredAsItIsRead(t *testing.T) {
	cfg := rbConfig(t)
	btWorkers(&cfg, "private", 1)
	cfg.Private.Queue = 3000
	btPrivateBurst(t, cfg)
}

// btPrivateBurst sends btBurst PUBs in one write and checks that the
// subscriber gets all of them, in order.
func btPrivateBurst(t *testing.T, cfg config.Config) {
	t.Helper()
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()
	sub := btHello(t, addr, "burst-sub")
	btWrite(t, sub, rbSubFrame(1, "burst/#"))
	r := btNewReader(sub)
	if a, err := r.ack(); err != nil || a.MsgID != 1 || a.Status != private.CodeOK {
		t.Fatalf("SUB: %+v %v", a, err)
	}
	pub := btHello(t, addr, "burst-pub")
	var flood []byte
	for i := range btBurst {
		flood = append(flood, rbPubFrame(0, "burst/t", btPayload(i))...)
	}
	flood = append(flood, rbPubFrame(0, "burst/end", nil)...)
	btWrite(t, pub, flood)

	got := 0
	for {
		f, err := r.next()
		if err != nil {
			t.Fatalf("after %d of %d deliveries: %v", got, btBurst, err)
		}
		if f.Type != private.TypePub {
			t.Fatalf("after %d deliveries: unexpected %v %x", got, f.Type, f.Payload)
		}
		m, err := private.DecodePub(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Topic) == "burst/end" {
			break
		}
		if i := btIndex(m.Data); i != got {
			t.Fatalf("delivery %d carries message %d", got, i)
		}
		got++
	}
	if got != btBurst {
		t.Fatalf("subscriber got %d of %d messages", got, btBurst)
	}
	if st := g.Bus().Stats(); st.Dropped != 0 {
		t.Fatalf("bus dropped %d messages", st.Dropped)
	}
}

// TestBurstReachesWebSocketSubscriber is the same burst from a WebSocket
// client: 10,000 pub messages with 64-byte data, in one TCP write.
func TestBurstReachesWebSocketSubscriber(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			cfg := rbConfig(t)
			btWorkers(&cfg, "websocket", workers)
			g := startGateway(t, cfg, Options{})
			sub := btWSDial(t, g)
			btWSSub(t, sub, "burst/#")
			pub := btWSDial(t, g)
			var flood []byte
			for i := range btBurst {
				flood = append(flood, btWSFrame(fmt.Appendf(nil, `{"op":"pub","topic":"burst/t","data":"%s"}`, btPayload(i)))...)
			}
			flood = append(flood, btWSFrame([]byte(`{"op":"pub","topic":"burst/end","data":0}`))...)
			if _, err := pub.NetConn().Write(flood); err != nil {
				t.Fatal(err)
			}

			got := 0
			for {
				m, err := btWSRead(sub)
				if err != nil {
					t.Fatalf("after %d of %d deliveries: %v", got, btBurst, err)
				}
				if m.Op != "" {
					t.Fatalf("after %d deliveries: %+v", got, m)
				}
				if m.Topic == "burst/end" {
					break
				}
				var data string
				if err := jsonString(m.Data, &data); err != nil {
					t.Fatal(err)
				}
				if i := btIndex([]byte(data)); i != got {
					t.Fatalf("delivery %d carries message %d", got, i)
				}
				got++
			}
			if got != btBurst {
				t.Fatalf("subscriber got %d of %d messages", got, btBurst)
			}
		})
	}
}

// btRetained is how many retained topics the replay tests cache, and
// btFlood how many SUB frames of "#" the flooder sends in one write.
const (
	btRetained = 100000
	btFlood    = 2000
)

// btRetain fills the cache with btRetained topics r/0 .. r/99999.
func btRetain(t *testing.T, g *Gateway) {
	t.Helper()
	for i := range btRetained {
		if err := g.Bus().Publish("r/"+strconv.Itoa(i), []byte("v"), "test"); err != nil {
			t.Fatal(err)
		}
	}
}

// btReplayCounter counts a flooder's retained deliveries, each topic once.
type btReplayCounter struct {
	seen     []bool
	received atomic.Int64
	began    chan struct{} // closed at the first value
	done     chan error    // nil once every topic came, else what went wrong
}

func newReplayCounter() *btReplayCounter {
	return &btReplayCounter{seen: make([]bool, btRetained), began: make(chan struct{}), done: make(chan error, 1)}
}

// add records one retained topic; it returns true when all have come.
func (rc *btReplayCounter) add(topic string) (bool, error) {
	i, err := strconv.Atoi(topic[len("r/"):])
	if err != nil || i < 0 || i >= btRetained {
		return false, fmt.Errorf("unexpected topic %q", topic)
	}
	if rc.seen[i] {
		return false, fmt.Errorf("%s replayed twice: a repeated SUB replayed again", topic)
	}
	rc.seen[i] = true
	n := rc.received.Add(1)
	if n == 1 {
		close(rc.began)
	}
	return n == btRetained, nil
}

// waitBegun returns as soon as the first value of the replay has come (or
// the bus dropped some, which wait reports). At once, not at a poll: the
// whole replay takes some 60 ms here, and a bystander that waited for a
// 20 ms poll before it asked came late into it, sometimes after the end.
func (rc *btReplayCounter) waitBegun(t *testing.T, g *Gateway) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute) // hang guard
	for {
		select {
		case <-rc.began:
			return
		case <-time.After(20 * time.Millisecond):
		}
		if g.Bus().Stats().Dropped > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out (hang guard) waiting for the replay to begin")
		}
	}
}

// wait waits for the whole replay, failing at once if the bus dropped
// any of it.
func (rc *btReplayCounter) wait(t *testing.T, g *Gateway) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute) // hang guard
	for {
		select {
		case err := <-rc.done:
			if err != nil {
				t.Fatalf("after %d retained values: %v", rc.received.Load(), err)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if d := g.Bus().Stats().Dropped; d > 0 {
			t.Fatalf("the bus dropped %d messages of the replay (%d delivered)", d, rc.received.Load())
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay incomplete: %d of %d", rc.received.Load(), btRetained)
		}
	}
}

// TestReplayDoesNotBlockPrivateBystander: with 100,000 retained topics, a
// client sends 2,000 SUB frames of "#" in one write. A bystander on the
// same worker sends a PING once the replay has begun; its PONG comes
// before the flooder's replay is complete, and the flooder gets every
// retained value exactly once (a repeated SUB does not replay again).
func TestReplayDoesNotBlockPrivateBystander(t *testing.T) {
	cfg := rbConfig(t)
	btWorkers(&cfg, "private", 1) // flooder and bystander share the worker
	cfg.Bus.MaxTopics = 2 * btRetained
	g := startGateway(t, cfg, Options{})
	btRetain(t, g)
	addr := g.Addr().String()
	bystander := btHello(t, addr, "bystander")
	flooder := btHello(t, addr, "flooder")

	rc := newReplayCounter()
	go func() {
		r := btNewReader(flooder)
		for {
			f, err := r.next()
			if err != nil {
				rc.done <- err
				return
			}
			m, err := private.DecodePub(f.Payload)
			if f.Type != private.TypePub || err != nil || m.Flags&private.PubRetained == 0 {
				rc.done <- fmt.Errorf("unexpected %v %x", f.Type, f.Payload)
				return
			}
			if all, err := rc.add(string(m.Topic)); all || err != nil {
				rc.done <- err
				return
			}
		}
	}()
	var flood []byte
	for range btFlood {
		flood = append(flood, rbSubFrame(0, "#")...)
	}
	btWrite(t, flooder, flood)
	rc.waitBegun(t, g)

	if err := rbPingPong(bystander, 0xb7); err != nil {
		t.Fatalf("bystander: %v", err)
	}
	atPong := rc.received.Load()
	rc.wait(t, g)
	if atPong >= btRetained {
		t.Fatalf("the bystander's PONG came after the flooder's whole replay (%d values)", atPong)
	}
	t.Logf("bystander answered when the flooder had %d of %d retained values", atPong, btRetained)
}

// TestReplayDoesNotBlockWebSocketBystander is the same flood from a
// WebSocket client: 2,000 {"op":"sub","topic":"#"} in one write, and a
// bystander's {"op":"ping"} answered before the replay completes.
func TestReplayDoesNotBlockWebSocketBystander(t *testing.T) {
	cfg := rbConfig(t)
	btWorkers(&cfg, "websocket", 1)
	cfg.Bus.MaxTopics = 2 * btRetained
	g := startGateway(t, cfg, Options{})
	btRetain(t, g)
	bystander := btWSDial(t, g)
	flooder := btWSDial(t, g)
	if err := leasePong(bystander); err != nil { // handshake done and served
		t.Fatal(err)
	}

	rc := newReplayCounter()
	go func() {
		for {
			m, err := btWSRead(flooder)
			if err != nil {
				rc.done <- err
				return
			}
			if m.Op != "" || !m.Retained {
				rc.done <- fmt.Errorf("unexpected %+v", m)
				return
			}
			if all, err := rc.add(m.Topic); all || err != nil {
				rc.done <- err
				return
			}
		}
	}()
	var flood []byte
	for range btFlood {
		flood = append(flood, btWSFrame([]byte(`{"op":"sub","topic":"#"}`))...)
	}
	if _, err := flooder.NetConn().Write(flood); err != nil {
		t.Fatal(err)
	}
	rc.waitBegun(t, g)

	if err := leasePong(bystander); err != nil {
		t.Fatalf("bystander: %v", err)
	}
	atPong := rc.received.Load()
	rc.wait(t, g)
	if atPong >= btRetained {
		t.Fatalf("the bystander's pong came after the flooder's whole replay (%d values)", atPong)
	}
	t.Logf("bystander answered when the flooder had %d of %d retained values", atPong, btRetained)
}

// btDropMessages is how many 1 KiB messages the drop tests publish to a
// subscriber that is not reading: more than its queue and both socket
// buffers hold, so some must be dropped.
const (
	btDropMessages = 20000
	btDropSize     = 1024
)

// btPublishDropFlood has a private device publish btDropMessages numbered
// messages on drop/t and then drop/end, and waits for the ACK of the last.
func btPublishDropFlood(t *testing.T, addr string) { btPublishFlood(t, addr, btDropMessages) }

// btPublishFlood publishes n numbered messages of btDropSize bytes on
// drop/t, then drop/end, and waits for the ACK of the last.
func btPublishFlood(t *testing.T, addr string, n int) {
	t.Helper()
	pub := btHello(t, addr, "drop-pub")
	data := make([]byte, btDropSize)
	var chunk []byte
	for i := range n {
		copy(data, btPayload(i))
		chunk = append(chunk, rbPubFrame(0, "drop/t", data)...)
		if len(chunk) >= 256<<10 {
			btWrite(t, pub, chunk)
			chunk = chunk[:0]
		}
	}
	btWrite(t, pub, append(chunk, rbPubFrame(9, "drop/end", nil)...))
	if a, err := btNewReader(pub).ack(); err != nil || a.MsgID != 9 || a.Status != private.CodeOK {
		t.Fatalf("last PUB: %+v %v", a, err)
	}
}

// TestDeliveriesResumeWhenTheSocketDrains: a subscriber does not read while
// 32 MB are published to it (its queue is made large enough to hold them):
// its socket fills, its deliveries wait in the bus, and when it reads again
// every message arrives, in order, none dropped. The session resumes on
// protocols.Writable, after the worker flushed the output on EPOLLOUT;
// without that call it waits for ever (checked: the read times out after
// some 3,700 messages).
func TestDeliveriesResumeWhenTheSocketDrains(t *testing.T) {
	const n = 32000 // of 1 KiB: more than both socket buffers hold
	cfg := rbConfig(t)
	cfg.Bus.QueueBytes = 64 << 20
	cfg.Private.Queue = 1 << 20
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()
	sub := btHello(t, addr, "stalled-sub")
	btWrite(t, sub, rbSubFrame(1, "drop/#"))
	r := btNewReader(sub)
	if a, err := r.ack(); err != nil || a.MsgID != 1 {
		t.Fatalf("SUB: %+v %v", a, err)
	}
	btPublishFlood(t, addr, n)
	rbEventually(t, "deliveries to wait in the bus", time.Minute, func() bool {
		return g.Bus().Stats().Delivered == n+1 // all queued, the socket full
	})

	got := 0
	for {
		f, err := r.next()
		if err != nil {
			t.Fatalf("after %d of %d: %v", got, n, err)
		}
		m, err := private.DecodePub(f.Payload)
		if f.Type != private.TypePub || err != nil {
			t.Fatalf("unexpected %v %x", f.Type, f.Payload)
		}
		if string(m.Topic) == "drop/end" {
			break
		}
		if i := btIndex(m.Data); i != got {
			t.Fatalf("delivery %d carries message %d", got, i)
		}
		got++
	}
	if got != n || g.Bus().Stats().Dropped != 0 {
		t.Fatalf("got %d of %d, bus dropped %d", got, n, g.Bus().Stats().Dropped)
	}
}

// TestDropsAreToldToPrivateSubscriber: a subscriber with a small queue
// (private.queue 64) does not read while 20 MB are published to it.
// When it reads again it finds DROPPED frames whose counts, added to
// what it received, make up every message published, received in order;
// /debug/registry and /metrics show the same count.
func TestDropsAreToldToPrivateSubscriber(t *testing.T) {
	cfg := rbConfig(t)
	cfg.Private.Queue = 64
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()
	sub := btHello(t, addr, "drop-sub")
	btWrite(t, sub, rbSubFrame(1, "drop/#"))
	r := btNewReader(sub)
	if a, err := r.ack(); err != nil || a.MsgID != 1 {
		t.Fatalf("SUB: %+v %v", a, err)
	}
	btPublishDropFlood(t, addr)

	var delivered, dropped uint64
	last := -1
	for {
		f, err := r.next()
		if err != nil {
			t.Fatalf("after %d delivered, %d dropped: %v", delivered, dropped, err)
		}
		if f.Type == private.TypeDropped {
			n, err := private.DecodeDropped(f.Payload)
			if err != nil || n == 0 {
				t.Fatalf("DROPPED %x: %d, %v", f.Payload, n, err)
			}
			dropped += n
			continue
		}
		m, err := private.DecodePub(f.Payload)
		if f.Type != private.TypePub || err != nil {
			t.Fatalf("unexpected %v %x", f.Type, f.Payload)
		}
		delivered++
		if string(m.Topic) == "drop/end" {
			break
		}
		i := btIndex(m.Data)
		if i <= last {
			t.Fatalf("message %d after %d", i, last)
		}
		last = i
	}
	if dropped == 0 || delivered+dropped != btDropMessages+1 {
		t.Fatalf("delivered %d + dropped %d, want a drop and %d in all", delivered, dropped, btDropMessages+1)
	}
	if n := btRegistryDropped(t, g, sub.LocalAddr()); n != int64(dropped) {
		t.Errorf("/debug/registry shows %d dropped for the subscriber, want %d", n, dropped)
	}
	if v := metric(httpGet(t, g, "/metrics"), `edgemux_private_total{event="dropped"}`); v != strconv.FormatUint(dropped, 10) {
		t.Errorf("/metrics private dropped = %q, want %d", v, dropped)
	}
	t.Logf("%d delivered, %d dropped and told", delivered, dropped)
}

// TestDropsAreToldToWebSocketSubscriber: the same with a WebSocket
// subscriber (bus.queue 64): {"op":"dropped","count":N} notices make up
// the difference.
func TestDropsAreToldToWebSocketSubscriber(t *testing.T) {
	cfg := rbConfig(t)
	cfg.Bus.Queue = 64
	g := startGateway(t, cfg, Options{})
	sub := btWSDial(t, g)
	btWSSub(t, sub, "drop/#")
	btPublishDropFlood(t, g.Addr().String())

	var delivered, dropped uint64
	last := -1
	for {
		m, err := btWSRead(sub)
		if err != nil {
			t.Fatalf("after %d delivered, %d dropped: %v", delivered, dropped, err)
		}
		if m.Op == "dropped" && m.Count > 0 {
			dropped += m.Count
			continue
		}
		if m.Op != "" {
			t.Fatalf("unexpected %+v", m)
		}
		delivered++
		if m.Topic == "drop/end" {
			break
		}
		var data string
		if err := jsonString(m.Data, &data); err != nil {
			t.Fatal(err)
		}
		i := btIndex([]byte(data))
		if i <= last {
			t.Fatalf("message %d after %d", i, last)
		}
		last = i
	}
	if dropped == 0 || delivered+dropped != btDropMessages+1 {
		t.Fatalf("delivered %d + dropped %d, want a drop and %d in all", delivered, dropped, btDropMessages+1)
	}
	if n := btRegistryDropped(t, g, sub.NetConn().LocalAddr()); n != int64(dropped) {
		t.Errorf("/debug/registry shows %d dropped for the subscriber, want %d", n, dropped)
	}
	if v := metric(httpGet(t, g, "/metrics"), `edgemux_websocket_total{event="dropped"}`); v != strconv.FormatUint(dropped, 10) {
		t.Errorf("/metrics websocket dropped = %q, want %d", v, dropped)
	}
	t.Logf("%d delivered, %d dropped and told", delivered, dropped)
}

// jsonString decodes a JSON string.
func jsonString(raw []byte, s *string) error {
	if len(raw) < 2 || raw[0] != '"' {
		return fmt.Errorf("not a JSON string: %s", raw)
	}
	*s = string(raw[1 : len(raw)-1]) // the test payloads need no escapes
	return nil
}
