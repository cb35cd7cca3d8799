package rudp

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// sendSnapshot is the sender state an ACK may change.
type sendSnapshot struct {
	una, nxt, end, peerLimit uint64
	lost, flying, inFlight   int
	cwnd                     int
	srtt                     time.Duration
	rack                     lossState
}

func snapshot(c *Conn) sendSnapshot {
	return sendSnapshot{c.snd.una, c.snd.nxt, c.snd.end, c.peerLimit, c.snd.lost, c.snd.flying, c.snd.inFlight, c.cc.cwnd, c.rtt.srtt, c.loss}
}

// forgedPacket is a DATA packet for client c, as its server would number
// it, carrying frames.
func forgedPacket(c *Client, frames []byte) []byte {
	d := AppendHeader(nil, Header{Type: TypeData, SessionID: c.ID(), Number: uint32(c.rx.expected())})
	return appendCRC(append(d, frames...), 0)
}

// TestForgedAcksChangeNothing: ACKs for fragments never sent (by the
// cumulative point or by a SACK range) are rejected whole: the sender's
// state is exactly what it was, and the stream completes.
func TestForgedAcksChangeNothing(t *testing.T) {
	st := newStream(t, 31, noImpairment(), 50, 5*time.Millisecond)
	st.runUntil(st.now.Add(100*time.Millisecond), nil)
	c := st.c
	if c.snd.flying == 0 {
		t.Fatal("nothing in flight to forge an ACK for")
	}
	nxt := uint32(c.snd.nxt)
	forged := []*ackFrame{
		{cum: nxt + 1, window: 100},
		{cum: nxt + 1000, window: 100},
		{cum: uint32(c.snd.una), window: 100, n: 1, ranges: [MaxSACKRanges]sackRange{{nxt, nxt + 1}}},
		{cum: uint32(c.snd.una) + 1, window: 60000, n: 2, ranges: [MaxSACKRanges]sackRange{{nxt - 1, nxt}, {nxt + 5, nxt + 9}}},
	}
	for i, f := range forged {
		before := snapshot(&c.Conn)
		c.Input(forgedPacket(c.Client, appendAck(nil, f)), st.now)
		if after := snapshot(&c.Conn); after != before {
			t.Fatalf("forged ACK %d changed the sender:\n before %+v\n after  %+v", i, before, after)
		}
	}
	if got := c.Stats().AcksRejected; got != uint64(len(forged)) {
		t.Fatalf("%d ACKs rejected, want %d", got, len(forged))
	}
	st.finish(50)
}

// TestSealedSession: with pre-shared keys, a device with its key gets a
// session whose payloads never cross the wire in clear; a wrong key, an
// unknown device or a plain client gets no session; a replayed or
// corrupted packet is dropped.
func TestSealedSession(t *testing.T) {
	key := bytes.Repeat([]byte{0x42}, 32)
	other := bytes.Repeat([]byte{0x43}, 32)
	server := Config{Keys: Keys{"dev-1": key, "dev-2": other}}
	s := newSim(t, 32, server, noImpairment())
	secret := []byte("SECRET-PAYLOAD-0123456789")
	leaked := false
	var captured [][]byte
	s.tap = func(up bool, b []byte) {
		leaked = leaked || bytes.Contains(b, secret)
		if p, err := ParseHeader(b); err == nil && p.Type == TypeData && up {
			captured = append(captured, append([]byte(nil), b...))
		}
	}
	var got [][]byte
	s.onServerMessage = func(c *Conn, m []byte) {
		got = append(got, m)
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	good := s.addClient(Config{DeviceID: "dev-1", PSK: key})
	s.established()
	for i := 0; i < 20; i++ {
		if err := good.Send(append(secret, byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	s.runUntil(s.now.Add(10*time.Second), func() bool { return len(good.received) == 20 })
	if len(got) != 20 || len(good.received) != 20 || !bytes.Equal(good.received[19], append(secret, 19)) {
		t.Fatalf("sealed session: server got %d, client got %d", len(got), len(good.received))
	}
	if leaked {
		t.Fatal("a payload crossed the wire in clear")
	}
	// A replayed and a corrupted copy of a client packet.
	sc := s.ep.Session(good.ID())
	var replay []byte
	for _, p := range captured {
		if h, _ := ParseHeader(p); h.SessionID == good.ID() && h.Sealed {
			replay = p
		}
	}
	if replay == nil {
		t.Fatal("no client packet captured")
	}
	dups, bad := sc.Stats().Duplicates, sc.Stats().Integrity
	s.ep.Input(good.addr, replay, s.now)
	corrupt := append([]byte(nil), replay...)
	corrupt[len(corrupt)-20] ^= 1
	corrupt[12] ^= 0x40 // a packet number the window has not seen
	s.ep.Input(good.addr, corrupt, s.now)
	if sc.Stats().Duplicates != dups+1 || sc.Stats().Integrity != bad+1 {
		t.Fatalf("replay: %d duplicates (was %d), %d integrity failures (was %d)", sc.Stats().Duplicates, dups, sc.Stats().Integrity, bad)
	}

	refusedBefore := s.ep.Stats().Refused
	wrongKey := s.addClient(Config{DeviceID: "dev-1", PSK: other})
	unknown := s.addClient(Config{DeviceID: "dev-9", PSK: key})
	plain := s.addClient(Config{})
	s.runUntil(s.now.Add(15*time.Second), nil)
	for name, c := range map[string]*simClient{"wrong key": wrongKey, "unknown device": unknown, "plain": plain} {
		if c.State() != StateClosed || !errors.Is(c.Err(), ErrHandshake) {
			t.Errorf("%s: %v %v", name, c.State(), c.Err())
		}
	}
	if st := s.ep.Stats(); st.Sessions != 1 || st.Refused <= refusedBefore {
		t.Fatalf("%+v", st)
	}
}

// TestSealedClientPlainServer: a server without keys refuses sealed clients.
func TestSealedClientPlainServer(t *testing.T) {
	s := newSim(t, 33, Config{}, noImpairment())
	c := s.addClient(Config{DeviceID: "dev-1", PSK: bytes.Repeat([]byte{1}, 32)})
	s.runUntil(s.now.Add(15*time.Second), nil)
	if c.State() != StateClosed || s.ep.Stats().SessionsOpened != 0 || s.ep.Stats().Refused == 0 {
		t.Fatalf("client %v, %+v", c.State(), s.ep.Stats())
	}
}

// TestBrokenFramingClosesTheSession: fragments that do not form messages
// (a middle fragment first, a first inside a message, a message past the
// limit) close the session with a CLOSE the client sees.
func TestBrokenFramingClosesTheSession(t *testing.T) {
	big := make([]byte, 1000)
	cases := map[string][]byte{
		"middle first":     appendData(nil, 0, 0, []byte("x")),
		"first in message": appendData(appendData(nil, 0, fragFirst, []byte("x")), 1, fragFirst|fragLast, []byte("y")),
		"too large": func() []byte {
			var b []byte
			for i := 0; i < 70; i++ { // 70 KB, the limit is 64 KiB
				flags := byte(0)
				if i == 0 {
					flags = fragFirst
				}
				b = appendData(b, uint32(i), flags, big)
			}
			return b
		}(),
	}
	for name, frames := range cases {
		s := newSim(t, 34, Config{}, noImpairment())
		c := s.addClient(Config{})
		s.established()
		sc := s.ep.Session(c.ID())
		for len(frames) > 0 { // as many packets as it takes
			var f frame
			n := 0
			for rest := frames; len(rest) > 0 && n+len(rest)-len(mustParse(rest, &f)) <= 1100; {
				next := mustParse(rest, &f)
				n += len(rest) - len(next)
				rest = next
			}
			d := AppendHeader(nil, Header{Type: TypeData, SessionID: c.ID(), Number: uint32(sc.rx.expected())})
			s.ep.Input(c.addr, appendCRC(append(d, frames[:n]...), 0), s.now)
			frames = frames[n:]
		}
		s.flush()
		s.runUntil(s.now.Add(time.Second), nil)
		if sc.State() != StateClosed || !errors.Is(c.Err(), ErrPeerClosed) || s.ep.Stats().Sessions != 0 {
			t.Errorf("%s: server %v, client %v %v", name, sc.State(), c.State(), c.Err())
		}
	}
}

func mustParse(b []byte, f *frame) []byte {
	rest, err := parseFrame(b, f)
	if err != nil {
		panic(err)
	}
	return rest
}
