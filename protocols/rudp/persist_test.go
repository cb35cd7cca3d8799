package rudp

import (
	"fmt"
	"testing"
	"time"
)

// TestPersistProbeAfterLostWindowUpdate: a sender whose data was all
// acknowledged exactly at the peer's window, and which queues more only
// afterwards, is held by the window with nothing in flight. The
// receiver's window update (its ACK once the application reads) is lost,
// and nothing else would ever tell the sender: the receiver has nothing
// to send, the keepalives are an hour away. Only the sender's persist
// probe, armed when the window holds data back and nothing is in flight,
// gets a fresh window; the message then arrives. Before the probe was
// armed on the send path too (it was armed only by an ACK), the message
// never left the client.
func TestPersistProbeAfterLostWindowUpdate(t *testing.T) {
	const window = 4
	cfg := Config{Window: window, MaxMessage: 1000, KeepAlive: time.Hour, IdleTimeout: 3 * time.Hour}
	s := newSim(t, 17, cfg, noImpairment())
	var got [][]byte
	s.onServerMessage = func(_ *Conn, m []byte) { got = append(got, m) }
	s.paused = true
	c := s.addClient(cfg)
	s.established()
	for i := range window { // one fragment each: the window exactly
		if err := c.Send(smallMessage(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.flush()
	s.runUntil(s.now.Add(10*time.Second), func() bool { return c.snd.empty() })
	if !c.snd.empty() || c.peerLimit != c.snd.nxt {
		t.Fatalf("the window is not exactly used up: %s", c.debugString())
	}
	// The server's application reads: its window opens, and the ACK
	// that says so is lost.
	s.paused = false
	s.readAll()
	lost := 0
	for {
		if _, _, ok := s.ep.AppendDatagram(s.buf[:0], s.now); !ok {
			break
		}
		lost++
	}
	if lost == 0 {
		t.Fatal("reading the full window sent no window update")
	}
	if err := c.Send(smallMessage(window)); err != nil {
		t.Fatal(err)
	}
	s.flush()
	s.runUntil(s.now.Add(time.Minute), func() bool { return len(got) == window+1 })
	if len(got) != window+1 {
		t.Fatalf("%d of %d messages arrived; client: %s persistAt=%d", len(got), window+1, c.debugString(), c.loss.persistAt)
	}
	for i, m := range got {
		if string(m) != string(smallMessage(i)) {
			t.Fatalf("message %d is %q", i, m)
		}
	}
	if c.Stats().ProbesSent == 0 {
		t.Fatal("delivered without a probe: the window update was not the one lost")
	}
}

// smallMessage is message i, a single fragment.
func smallMessage(i int) []byte { return []byte(fmt.Sprintf("message %d", i)) }
