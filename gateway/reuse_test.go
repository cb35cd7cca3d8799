package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/private"
)

// rbReuseKind is one way a client in TestRegistryReuseNeverMisroutes uses
// its connection. Every kind talks only about itself: topics, message ids,
// ping tokens and payloads all carry the client's sequence number, so a
// byte meant for another connection (an fd reused while an event or a
// delivery for its previous owner was in flight) cannot pass for its own.
type rbReuseKind struct {
	name string
	run  func(addr string, src netip.Addr, seq uint32) error
	// quarantined is true for kinds the quarantine book must count once
	// each, as a timeout.
	quarantined bool
}

var rbReuseKinds = [...]rbReuseKind{
	{name: "echo", run: rbReuseEcho},
	{name: "hello-ping", run: rbReuseHelloPing},
	{name: "echo", run: rbReuseEcho},
	{name: "close-at-once", run: rbReuseCloseAtOnce},
	{name: "echo", run: rbReuseEcho},
	{name: "close-mid-frame", run: rbReuseCloseMidFrame},
	{name: "hello-ping", run: rbReuseHelloPing},
	{name: "close-mid-hello", run: rbReuseCloseMidHello, quarantined: true},
}

// TestRegistryReuseNeverMisroutes opens and closes 100,000 connections
// from many concurrent clients, so fds and registry slots are reused all
// the time while events, deliveries and closes for their previous owners
// are still in flight. Echo clients subscribe to their own topic, publish
// a unique payload and must get back exactly their ACKs, their payload and
// their PONG, nothing else; others say HELLO and PING, or close at once,
// in the middle of a frame after HELLO, or in the middle of the HELLO
// itself. Stale events may be dropped (Stale() > 0), but no byte may be
// lost or reach the wrong connection, and the quarantine book must count
// exactly the clients that hung up mid-HELLO, as timeouts.
func TestRegistryReuseNeverMisroutes(t *testing.T) {
	total := 100000
	if testing.Short() {
		total = 10000
	}
	const clients = 16
	cfg := rbConfig(t)
	// Mid-HELLO hang-ups wait for the deadline. It is generous so that a
	// client goroutine descheduled between connect and its first write on
	// a loaded machine is not taken for a silent peer.
	cfg.Sniff.Deadline = 10 * time.Second
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()

	var tally rbReuseTally
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seq := next.Add(1) - 1
				if seq >= int64(total) {
					return
				}
				k := &rbReuseKinds[seq%int64(len(rbReuseKinds))]
				err := k.run(addr, rbSource(int(seq%16)), uint32(seq))
				tally.add(k.name, seq, err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	rbEventually(t, "the registry to empty", 2*time.Minute, func() bool { return g.reg.Len() == 0 })

	t.Logf("%d connections in %v (%.0f/s): %v; stale events dropped: %d",
		total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), tally.counts(), g.reg.Stale())
	tally.report(t)

	wantTimeouts := uint64(0)
	for seq := range total {
		if rbReuseKinds[seq%len(rbReuseKinds)].quarantined {
			wantTimeouts++
		}
	}
	st := g.Book().Stats()
	want := map[protocols.Reason]uint64{protocols.ReasonTimeout: wantTimeouts}
	for reason, n := range st.Reasons {
		if n != want[reason] {
			t.Errorf("quarantine book: %d %q landings, want %d (all: %v)", n, reason, want[reason], st.Reasons)
		}
	}
}

// rbReuseTally counts outcomes per kind and keeps the first failures.
type rbReuseTally struct {
	mu       sync.Mutex
	ok, bad  map[string]int
	failures []string
}

func (r *rbReuseTally) add(kind string, seq int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ok == nil {
		r.ok, r.bad = map[string]int{}, map[string]int{}
	}
	if err == nil {
		r.ok[kind]++
		return
	}
	r.bad[kind]++
	if len(r.failures) < 20 {
		r.failures = append(r.failures, fmt.Sprintf("client %d (%s): %v", seq, kind, err))
	}
}

func (r *rbReuseTally) counts() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("ok %v, failed %v", r.ok, r.bad)
}

func (r *rbReuseTally) report(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.failures {
		t.Error(f)
	}
}

// errRbMisrouted marks bytes that belong to some other connection.
var errRbMisrouted = errors.New("misrouted")

// rbReuseEcho subscribes to its own topic, publishes a unique payload with
// an ACK, and must receive exactly: ACK 0 (HELLO), ACK sub, ACK pub and
// its own delivery (in either order), then the PONG for its token.
func rbReuseEcho(addr string, src netip.Addr, seq uint32) error {
	c, err := rbDialFrom(addr, src)
	if err != nil {
		return err
	}
	defer c.Close()
	topic := fmt.Sprintf("reuse/%d", seq)
	payload := fmt.Appendf(nil, "payload of client %d", seq)
	subID, pubID := seq*4+1, seq*4+2
	if err := rbWrite(c, append(rbHelloFrame(fmt.Sprint("echo-", seq)), rbSubFrame(subID, topic)...)); err != nil {
		return err
	}
	if err := rbExpectAck(c, 0); err != nil {
		return err
	}
	if err := rbExpectAck(c, subID); err != nil {
		return err
	}
	if err := rbWrite(c, rbPubFrame(pubID, topic, payload)); err != nil {
		return err
	}
	if err := rbExpectAckAndDelivery(c, pubID, topic, payload); err != nil {
		return err
	}
	return rbPingPong(c, uint64(seq)<<32|0xec40)
}

// rbExpectAckAndDelivery reads two frames: ACK{pubID} and the delivery of
// payload on topic, in either order.
func rbExpectAckAndDelivery(c net.Conn, pubID uint32, topic string, payload []byte) error {
	acked, delivered := false, false
	for !acked || !delivered {
		f, err := rbReadFrame(c)
		if err != nil {
			return fmt.Errorf("lost: acked %v, delivered %v: %w", acked, delivered, err)
		}
		switch f.Type {
		case private.TypeAck:
			a, err := private.DecodeAck(f.Payload)
			if err != nil || acked || a.MsgID != pubID || a.Status != private.CodeOK {
				return fmt.Errorf("%w: ACK %+v (%v), want ACK{%d, ok} once", errRbMisrouted, a, err, pubID)
			}
			acked = true
		case private.TypePub:
			m, err := private.DecodePub(f.Payload)
			if err != nil || delivered || string(m.Topic) != topic || string(m.Data) != string(payload) {
				return fmt.Errorf("%w: delivery %s=%q (%v), want %s=%q once", errRbMisrouted, m.Topic, m.Data, err, topic, payload)
			}
			delivered = true
		default:
			return fmt.Errorf("%w: unexpected %v %x", errRbMisrouted, f.Type, f.Payload)
		}
	}
	return nil
}

// rbPingPong sends a PING with token and wants its PONG as the very next
// frame: nothing else may be waiting on the connection.
func rbPingPong(c net.Conn, token uint64) error {
	if err := rbWrite(c, rbPingFrame(token)); err != nil {
		return err
	}
	return rbExpectPong(c, token)
}

func rbExpectPong(c net.Conn, token uint64) error {
	f, err := rbReadFrame(c)
	if err != nil {
		return fmt.Errorf("lost PONG: %w", err)
	}
	if f.Type != private.TypePong || len(f.Payload) != 8 || binary.BigEndian.Uint64(f.Payload) != token {
		return fmt.Errorf("%w: got %v %x, want PONG %x", errRbMisrouted, f.Type, f.Payload, token)
	}
	return nil
}

// rbReuseHelloPing pipelines HELLO and PING and wants ACK 0 and its PONG.
func rbReuseHelloPing(addr string, src netip.Addr, seq uint32) error {
	c, err := rbDialFrom(addr, src)
	if err != nil {
		return err
	}
	defer c.Close()
	token := uint64(seq)<<32 | 0x9149
	if err := rbWrite(c, append(rbHelloFrame(fmt.Sprint("ping-", seq)), rbPingFrame(token)...)); err != nil {
		return err
	}
	if err := rbExpectAck(c, 0); err != nil {
		return err
	}
	return rbExpectPong(c, token)
}

// rbReuseCloseAtOnce connects and hangs up before saying anything: with a
// FIN or, every other time, a reset.
func rbReuseCloseAtOnce(addr string, src netip.Addr, seq uint32) error {
	c, err := rbDialFrom(addr, src)
	if err != nil {
		return err
	}
	if seq%2 == 0 {
		rbCloseAbort(c)
	} else {
		c.Close()
	}
	return nil
}

// rbReuseCloseMidFrame says HELLO, then sends half a PUB and resets the
// connection: the worker holds a partial frame when the fd goes away.
func rbReuseCloseMidFrame(addr string, src netip.Addr, seq uint32) error {
	c, err := rbHelloConn(addr, src, fmt.Sprint("mid-", seq))
	if err != nil {
		return err
	}
	pub := rbPubFrame(seq*4+3, fmt.Sprintf("reuse/%d", seq), []byte("never finished"))
	err = rbWrite(c, pub[:len(pub)/2])
	rbCloseAbort(c)
	return err
}

// rbReuseCloseMidHello sends half a HELLO and hangs up (FIN): the sniffer
// still needs more bytes, which never come, so at the deadline the
// connection is quarantined as a timeout and recorded once.
func rbReuseCloseMidHello(addr string, src netip.Addr, seq uint32) error {
	c, err := rbDialFrom(addr, src)
	if err != nil {
		return err
	}
	// One byte: the sniffer needs the second magic byte to hand it to the
	// private handler, so the connection is still sniffing at the deadline.
	hello := rbHelloFrame(fmt.Sprint("half-", seq))
	err = rbWrite(c, hello[:1])
	c.Close()
	return err
}
