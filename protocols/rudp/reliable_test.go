package rudp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// testMessage is message i of a stream: its index, then bytes that
// depend on it, of a length that depends on it (0 to 3 fragments).
func testMessage(stream, i int) []byte {
	r := rand.New(rand.NewPCG(uint64(stream), uint64(i)))
	n := 8 + r.IntN(3000)
	if i%7 == 0 {
		n = 8 + r.IntN(64)
	}
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b[0:], uint32(stream))
	binary.BigEndian.PutUint32(b[4:], uint32(i))
	for k := 8; k < n; k++ {
		b[k] = byte(r.Uint32())
	}
	return b
}

// checkStream reports the first message of got that is not want's i-th:
// a loss, a duplicate or a reordering all show as a mismatch.
func checkStream(got [][]byte, stream, want int) error {
	if len(got) != want {
		return fmt.Errorf("stream %d: %d messages, want %d", stream, len(got), want)
	}
	for i, m := range got {
		if !bytes.Equal(m, testMessage(stream, i)) {
			return fmt.Errorf("stream %d: message %d is not the %d-th sent (len %d)", stream, i, i, len(m))
		}
	}
	return nil
}

func impaired(loss float64) lossy.Impairment {
	return lossy.Impairment{
		Loss: loss, Delay: 10 * time.Millisecond, Jitter: 3 * time.Millisecond,
		Reorder: 0.05, ReorderDelay: 15 * time.Millisecond, Duplicate: 0.05,
	}
}

// TestReliableUnderLoss: 0 lost, duplicated or misordered messages at
// 1, 10 and 30 % loss each way, with jitter, reordering and duplication,
// in both directions, messages of 0 to 3 fragments.
func TestReliableUnderLoss(t *testing.T) {
	for _, loss := range []float64{0.01, 0.10, 0.30} {
		t.Run(fmt.Sprintf("loss=%.0f%%", loss*100), func(t *testing.T) {
			runReliable(t, lossy.Config{Up: impaired(loss), Down: impaired(loss)}, Config{}, Config{})
		})
	}
}

// TestReliableBurstyCorruptSealed: the same over bursty (Gilbert-Elliott,
// about 10 % on average, in runs) loss with 1 % of datagrams corrupted,
// in sealed mode: corrupted packets fail the AEAD and are sent again.
func TestReliableBurstyCorruptSealed(t *testing.T) {
	imp := impaired(0)
	imp.Burst = &lossy.GilbertElliott{GoodToBad: 0.03, BadToGood: 0.25, LossGood: 0.02, LossBad: 0.75}
	imp.Corrupt = 0.01
	key := bytes.Repeat([]byte{7}, 32)
	cs := runReliable(t, lossy.Config{Up: imp, Down: imp}, Config{Keys: Keys{"dev": key}}, Config{DeviceID: "dev", PSK: key})
	var integrity uint64
	for _, c := range cs {
		integrity += c.Stats().Integrity
	}
	if integrity == 0 {
		t.Fatal("no corrupted packet was caught")
	}
}

// runReliable runs 4 clients each sending 300 messages to an echoing
// server over net, and checks both directions' streams.
func runReliable(t *testing.T, net lossy.Config, server, client Config) []*simClient {
	const clients, perClient = 4, 300
	s := newSim(t, 11, server, net)
	got := map[uint64][][]byte{}
	s.onServerMessage = func(c *Conn, msg []byte) {
		got[c.ID()] = append(got[c.ID()], msg)
		if err := c.Send(msg); err != nil { // echo
			t.Fatalf("echo: %v", err)
		}
	}
	for i := 0; i < clients; i++ {
		s.addClient(client)
	}
	s.established()
	sent := make([]int, clients)
	s.app = func(time.Time) {
		for i, c := range s.clients {
			for sent[i] < perClient && c.Buffered() < 32<<10 {
				if err := c.Send(testMessage(i, sent[i])); err != nil {
					t.Fatalf("send: %v", err)
				}
				sent[i]++
			}
		}
	}
	s.app(s.now)
	s.flush()
	s.runUntil(s.now.Add(10*time.Minute), func() bool {
		for _, c := range s.clients {
			if len(c.received) < perClient {
				return false
			}
		}
		return true
	})
	for i, c := range s.clients {
		if err := checkStream(got[c.ID()], i, perClient); err != nil {
			t.Errorf("client to server: %v", err)
		}
		if err := checkStream(c.received, i, perClient); err != nil {
			t.Errorf("server to client: %v", err)
		}
		st := c.Stats()
		t.Logf("client %d: %d retransmits, %d RTOs, %d probes, %d bad packets, srtt %v", i, st.Retransmits, st.RTOs, st.ProbesSent, st.Integrity, c.SRTT())
	}
	ns := s.net.Stats()
	t.Logf("virtual %v; up: %d sent %d lost %d dup %d corrupt; down: %d sent %d lost",
		s.now.Sub(simStart), ns.Up.Sent, ns.Up.Lost, ns.Up.Duplicated, ns.Up.Corrupted, ns.Down.Sent, ns.Down.Lost)
	return s.clients
}

// TestSequenceWrap: a stream whose fragment and packet numbers cross
// 2^32 (the wire carries their low 32 bits) over a lossy, reordering path
// loses, repeats and reorders nothing.
func TestSequenceWrap(t *testing.T) {
	st := newStream(t, 12, lossy.Config{Up: impaired(0.1), Down: impaired(0.1)}, 400, 2*time.Millisecond)
	sc := st.ep.Session(st.c.ID())
	const near = 1<<32 - 100
	for _, c := range []*Conn{&st.c.Conn, sc} {
		if !c.snd.empty() || c.rcv.nxt != c.rcv.top {
			t.Fatal("queues not empty")
		}
		c.snd = sendQueue{una: near, nxt: near, end: near}
		c.peerLimit = near + uint64(c.cfg.Window)
		c.rcv.base, c.rcv.nxt, c.rcv.top = near, near, near
		c.nextPN = near
	}
	// Each side has seen the other's packets up to just below near.
	st.c.rx = replayWindow{largest: near - 1, any: true}
	sc.rx = replayWindow{largest: near - 1, any: true}
	st.finish(400)
	if st.c.snd.nxt < 1<<32 || st.c.nextPN < 1<<32 || sc.nextPN < 1<<32 {
		t.Fatalf("did not cross 2^32: fragment %d, packets %d and %d", st.c.snd.nxt, st.c.nextPN, sc.nextPN)
	}
}
