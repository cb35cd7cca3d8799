package gateway

// The write path past EAGAIN: outputs many times larger than the socket
// buffer, to readers that keep reading and never write, so the only thing
// that moves the output along is the EPOLLOUT edge. A lost edge shows as a
// reader that stops short of the whole.

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

// Each round sends writeRounds messages of writeChunk bytes: 7.5 MiB, far
// past a loopback socket's buffer, in one burst.
const (
	writeRounds   = 12
	writeMessages = 128
	writeChunk    = 60000
)

// largeOutputConfig lets a subscriber's output grow to a whole round, so
// backpressure never ends the test before the write path is exercised.
func largeOutputConfig(t *testing.T, policy string) config.Config {
	cfg := rbConfig(t)
	cfg.Dispatch.Policy = policy
	cfg.Limits.OutputHighWater = 64 << 20
	cfg.WebSocket.HighWater = 64 << 20
	cfg.Bus.Queue = 2 * writeMessages
	cfg.Bus.QueueBytes = 64 << 20
	cfg.Private.Queue = 2 * writeMessages
	return cfg
}

// roundPayload is message i of a round: its index up front, as text so
// that it reads the same in a WebSocket delivery's JSON, then a filler.
func roundPayload(round, i int) []byte {
	p := bytes.Repeat([]byte{byte('a' + i%26)}, writeChunk)
	copy(p, roundIndex(round, i))
	return p
}

func roundIndex(round, i int) string { return fmt.Sprintf("%04d/%04d:", round, i) }

func checkRoundPayload(p []byte, round, i int) error {
	if len(p) != writeChunk {
		return fmt.Errorf("round %d message %d: %d bytes", round, i, len(p))
	}
	if want := roundIndex(round, i); !bytes.HasPrefix(p, []byte(want)) {
		return fmt.Errorf("message %s carries %.10s", want, p)
	}
	return nil
}

// publishRound sends one round's messages in one write.
func publishRound(t *testing.T, pub net.Conn, topic string, round int) {
	var burst []byte
	for i := range writeMessages {
		burst = append(burst, rbPubFrame(0, topic, roundPayload(round, i))...)
	}
	if err := rbWrite(pub, burst); err != nil {
		t.Fatal(err)
	}
}

// TestLargeOutputsArriveWholePrivate: rounds far past the socket buffer
// reach one reader (messages it alone gets, its output a copy) and two
// readers (messages they share, their outputs references to the same
// frames, written with writev), whole and in order, under every policy.
func TestLargeOutputsArriveWholePrivate(t *testing.T) {
	for _, policy := range everyPolicy {
		for _, readers := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d-readers", policy, readers), func(t *testing.T) {
				g := startGateway(t, largeOutputConfig(t, policy), Options{})
				addr := g.Addr().String()
				subs := make([]net.Conn, readers)
				for r := range subs {
					subs[r] = privateSubscriber(t, addr, "reader"+strconv.Itoa(r), false)
				}
				pub := bigPublisher(t, addr)
				for round := range writeRounds {
					publishRound(t, pub, "big/"+strconv.Itoa(round), round)
					for r, sub := range subs { // the second waits, its output queued, while the first reads
						for i := range writeMessages {
							f, err := rbReadFrame(sub)
							if err != nil {
								t.Fatalf("round %d reader %d: stalled after %d of %d messages: %v", round, r, i, writeMessages, err)
							}
							m, err := private.DecodePub(f.Payload)
							if err != nil {
								t.Fatal(err)
							}
							if err := checkRoundPayload(m.Data, round, i); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			})
		}
	}
}

// TestFanOutOutputsShareFrames: a 4 MiB message to two subscribers that
// do not read, more than their sockets take, for each protocol that
// shares its encoding of a delivery. What each socket leaves of it is
// kept as a reference to the one encoding both were delivered, not as a
// copy: the two outputs end in the same byte of memory. (A WebSocket
// frame's header is the connection's own, copied; its JSON is shared.)
func TestFanOutOutputsShareFrames(t *testing.T) {
	const size = 4 << 20
	for _, proto := range []string{"private", "websocket"} {
		t.Run(proto, func(t *testing.T) {
			var mu sync.Mutex
			ends := map[uint64]*byte{} // by connection: where its last kept frame ends
			testHookKeptFrames = func(conn uint64, refs [][]byte) {
				last := refs[len(refs)-1]
				mu.Lock()
				ends[conn] = &last[len(last)-1]
				mu.Unlock()
			}
			t.Cleanup(func() { testHookKeptFrames = nil })
			cfg := largeOutputConfig(t, "entropy")
			cfg.Private.MaxFrame, cfg.Bus.MaxPayload, cfg.Limits.MaxInput = 2*size, 2*size, 2*size+64
			g := startGateway(t, cfg, Options{})
			addr := g.Addr().String()
			for r := range 2 {
				idleSubscriber(t, addr, proto, "idle-reader"+strconv.Itoa(r))
			}
			pub := bigPublisher(t, addr)
			if err := rbWrite(pub, rbPubFrame(0, "big/0", bytes.Repeat([]byte{'x'}, size))); err != nil {
				t.Fatal(err)
			}
			eventually(t, "both outputs to keep the frame", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(ends) == 2
			})
			mu.Lock()
			defer mu.Unlock()
			var got []*byte
			for _, end := range ends {
				got = append(got, end)
			}
			if got[0] != got[1] {
				t.Fatal("the two outputs keep copies of the frame, not the frame")
			}
		})
	}
}

// TestOwnWriteAfterSharedOutput: a subscriber whose output holds
// references to shared frames (another subscriber shares them and does
// not read) sends a PING. Its PONG, written while that output waits, is
// queued behind it: the subscriber reads every delivery whole and in
// order, and the PONG once, between two of them.
func TestOwnWriteAfterSharedOutput(t *testing.T) {
	var mu sync.Mutex
	keeping := map[uint64]bool{}
	testHookKeptFrames = func(conn uint64, _ [][]byte) {
		mu.Lock()
		keeping[conn] = true
		mu.Unlock()
	}
	t.Cleanup(func() { testHookKeptFrames = nil })
	g := startGateway(t, largeOutputConfig(t, "entropy"), Options{})
	addr := g.Addr().String()
	idleSubscriber(t, addr, "private", "idle")
	sub := privateSubscriber(t, addr, "reader", true)
	pub := bigPublisher(t, addr)
	publishRound(t, pub, "big/0", 0)
	eventually(t, "both outputs to keep frames", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(keeping) == 2
	})
	if err := rbWrite(sub, rbPingFrame(7)); err != nil {
		t.Fatal(err)
	}
	pongs := 0
	for i := 0; i < writeMessages; {
		f, err := rbReadFrame(sub)
		if err != nil {
			t.Fatalf("after %d of %d messages and %d PONGs: %v", i, writeMessages, pongs, err)
		}
		switch f.Type {
		case private.TypePong:
			pongs++
		case private.TypePub:
			m, err := private.DecodePub(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkRoundPayload(m.Data, 0, i); err != nil {
				t.Fatal(err)
			}
			i++
		default:
			t.Fatalf("a frame of type %v", f.Type)
		}
	}
	if pongs != 1 {
		t.Fatalf("%d PONGs among the deliveries, want 1", pongs)
	}
}

// bigPublisher is the private connection that publishes the tests'
// messages, closed when the test ends.
func bigPublisher(t *testing.T, addr string) net.Conn {
	t.Helper()
	pub, err := rbHelloConn(addr, rbAnySource, "writer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return pub
}

// idleSubscriber subscribes to big/# over proto and never reads again. Its
// socket buffers are small at both ends (on loopback they grow to
// megabytes), so what it is sent soon waits in the gateway.
func idleSubscriber(t *testing.T, addr, proto, name string) {
	t.Helper()
	if proto == "private" {
		privateSubscriber(t, addr, name, true)
	} else {
		wsBigSubscriber(t, addr, true)
	}
}

// privateSubscriber is a private connection subscribed to big/#, closed
// when the test ends; small: with small socket buffers.
func privateSubscriber(t *testing.T, addr, name string, small bool) net.Conn {
	t.Helper()
	var sub net.Conn
	var err error
	if small {
		sub, err = dialSmallWindow(addr)
	} else {
		sub, err = net.DialTimeout("tcp", addr, rbIOTimeout)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	if err := rbWrite(sub, append(rbHelloFrame(name), rbSubFrame(1, "big/#")...)); err != nil {
		t.Fatal(err)
	}
	if err := rbExpectAck(sub, 0); err != nil {
		t.Fatal(err)
	}
	if err := rbExpectAck(sub, 1); err != nil {
		t.Fatal(err)
	}
	if small {
		if err := shrinkServerSendBuffer(sub); err != nil { // accepted by now
			t.Fatal(err)
		}
	}
	return sub
}

// wsBigSubscriber is a WebSocket connection subscribed to big/# (in place
// once its ping is answered), closed when the test ends; small: with
// small socket buffers.
func wsBigSubscriber(t *testing.T, addr string, small bool) *gws.Conn {
	t.Helper()
	d := *gws.DefaultDialer
	if small {
		d.NetDial = func(_, addr string) (net.Conn, error) { return dialSmallWindow(addr) }
	}
	ws, _, err := d.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if small {
		if err := shrinkServerSendBuffer(ws.UnderlyingConn()); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{`{"op":"sub","topic":"big/#"}`, `{"op":"ping"}`} {
		if err := ws.WriteMessage(gws.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if pong := readWSMessage(t, ws); !bytes.Contains(pong, []byte(`"pong"`)) {
		t.Fatalf("ping answered %s", pong)
	}
	return ws
}

// TestLargeOutputsArriveWholeWebSocket is TestLargeOutputsArriveWholePrivate
// over WebSocket: with two readers, an output is the connection's own
// frame headers between references to the shared JSON texts.
func TestLargeOutputsArriveWholeWebSocket(t *testing.T) {
	for _, policy := range everyPolicy {
		for _, readers := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d-readers", policy, readers), func(t *testing.T) {
				g := startGateway(t, largeOutputConfig(t, policy), Options{})
				addr := g.Addr().String()
				subs := make([]*gws.Conn, readers)
				for r := range subs {
					subs[r] = wsBigSubscriber(t, addr, false)
				}
				pub := bigPublisher(t, addr)
				for round := range writeRounds {
					publishRound(t, pub, "big/"+strconv.Itoa(round), round)
					for r, ws := range subs { // the second waits, its output queued, while the first reads
						for i := range writeMessages {
							msg := readWSMessage(t, ws)
							topic := fmt.Sprintf(`"topic":"big/%d"`, round)
							data := `"data":"` + roundIndex(round, i)
							if !bytes.Contains(msg, []byte(topic)) || !bytes.Contains(msg, []byte(data)) || len(msg) < writeChunk {
								t.Fatalf("round %d reader %d message %d: %.120s (%d bytes)", round, r, i, msg, len(msg))
							}
						}
					}
				}
			})
		}
	}
}

// readWSMessage reads one whole message from ws, with the hang guard.
func readWSMessage(t *testing.T, ws *gws.Conn) []byte {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(rbIOTimeout))
	_, r, err := ws.NextReader()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriteEdgeNotLost widens the window between a write's EAGAIN and the
// arm, so the reader drains the socket inside it and the one EPOLLOUT edge
// comes before anyone waits for it. Without the flush after the arm the
// rest of the output waits for ever.
func TestWriteEdgeNotLost(t *testing.T) {
	testHookWriteAgain = func() { time.Sleep(2 * time.Millisecond) }
	t.Cleanup(func() { testHookWriteAgain = nil })
	t.Run("private", TestLargeOutputsArriveWholePrivate)
	t.Run("websocket", TestLargeOutputsArriveWholeWebSocket)
}

// TestReadEdgeNotLost widens the window after a read met EAGAIN, while a
// client sends publishes in lockstep: each one as soon as the previous one
// is acknowledged, which is while the worker still sits in that window.
// The edge its bytes raise must queue the connection again; if it were
// swallowed the client would wait for its ACK for ever. Each publish is
// 60 KB, most of a socket buffer, so reads also stop short of it.
func TestReadEdgeNotLost(t *testing.T) {
	testHookReadAgain = func() { time.Sleep(time.Millisecond) }
	t.Cleanup(func() { testHookReadAgain = nil })
	const pubs = 200
	data := bytes.Repeat([]byte{'x'}, writeChunk)
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			g := startGateway(t, largeOutputConfig(t, policy), Options{})
			c, err := rbHelloConn(g.Addr().String(), rbAnySource, "publisher")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for i := range pubs {
				if err := rbWrite(c, rbPubFrame(uint32(i+1), "in/"+strconv.Itoa(i%10), data)); err != nil {
					t.Fatal(err)
				}
				if err := rbExpectAck(c, uint32(i+1)); err != nil {
					t.Fatalf("after %d of %d ACKs: %v", i, pubs, err)
				}
			}
		})
	}
}
