package rudp

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// streamSim is one client sending testMessage(0, i) every interval to a
// server that records them.
type streamSim struct {
	*sim
	c    *simClient
	got  [][]byte
	sent int
}

func newStream(t *testing.T, seed uint64, net lossy.Config, total int, interval time.Duration) *streamSim {
	return newStreamOver(t, seed, net, Config{}, Config{}, total, interval)
}

// newStreamOver is newStream with the server and the client configured.
func newStreamOver(t *testing.T, seed uint64, net lossy.Config, server, client Config, total int, interval time.Duration) *streamSim {
	st := &streamSim{sim: newSim(t, seed, server, net)}
	st.onServerMessage = func(c *Conn, msg []byte) { st.got = append(st.got, msg) }
	st.c = st.addClient(client)
	st.established()
	next := st.now
	st.wake = func() time.Time {
		if st.sent >= total {
			return time.Time{}
		}
		return next
	}
	st.app = func(now time.Time) {
		for st.sent < total && !now.Before(next) {
			if err := st.c.Send(testMessage(0, st.sent)); err != nil {
				t.Fatalf("send %d: %v", st.sent, err)
			}
			st.sent++
			next = next.Add(interval)
		}
	}
	return st
}

func (st *streamSim) finish(total int) {
	st.t.Helper()
	st.runUntil(st.now.Add(5*time.Minute), func() bool { return len(st.got) >= total })
	if err := checkStream(st.got, 0, total); err != nil {
		st.t.Fatal(err)
	}
}

// TestBlackoutSurvived: ten seconds of silence both ways in the middle
// of a stream; the session lives (death is 75 s of silence) and every
// message arrives once, in order, soon after the path comes back.
func TestBlackoutSurvived(t *testing.T) {
	st := newStream(t, 21, noImpairment(), 300, 100*time.Millisecond)
	from := st.now.Add(10 * time.Second)
	to := from.Add(10 * time.Second)
	st.net.Blackout(from, to)
	st.finish(300)
	sc := st.ep.Session(st.c.ID())
	if sc == nil || sc.State() != StateEstablished || st.c.State() != StateEstablished {
		t.Fatalf("session died: client %v (%v)", st.c.State(), st.c.Err())
	}
	if st.net.Stats().Up.Blackholed == 0 {
		t.Fatal("the blackout dropped nothing")
	}
	if back := st.c.Stats(); back.RTOs == 0 {
		t.Fatal("no RTO during a 10 s blackout")
	}
}

// TestIdleDeathByTime: a peer that vanishes is declared dead after the
// idle timeout of silence, not earlier and not after a retry count.
func TestIdleDeathByTime(t *testing.T) {
	st := newStream(t, 22, noImpairment(), 20, 50*time.Millisecond)
	st.runUntil(st.now.Add(2*time.Second), nil)
	cut := st.now
	st.net.Blackout(cut, cut.Add(time.Hour))
	if err := st.c.Send([]byte("into the void")); err != nil {
		t.Fatal(err)
	}
	// The client last heard from the server before the cut, and the
	// server from the client; both die the idle timeout after that, not before.
	death := st.c.epoch.Add(time.Duration(st.c.lastHeard) + DefaultIdleTimeout)
	if !death.After(cut) || death.Sub(cut) > DefaultIdleTimeout {
		t.Fatalf("last heard %v before the cut", cut.Sub(st.c.epoch.Add(time.Duration(st.c.lastHeard))))
	}
	st.runUntil(death.Add(-time.Second), nil)
	if st.c.State() != StateEstablished || st.ep.Stats().Sessions != 1 {
		t.Fatalf("dead before the idle timeout: %v, %d server sessions", st.c.State(), st.ep.Stats().Sessions)
	}
	if st.c.Stats().RTOs < 5 {
		t.Fatalf("only %d RTOs before death: the backoff is not capped", st.c.Stats().RTOs)
	}
	st.runUntil(death.Add(time.Second), nil)
	if !errors.Is(st.c.Err(), ErrIdle) || st.ep.Stats().Sessions != 0 {
		t.Fatalf("alive after the idle timeout: client %v %v, %d server sessions", st.c.State(), st.c.Err(), st.ep.Stats().Sessions)
	}
}

// TestKeepAliveOverLoss: a client with nothing to say keeps its session
// for 10 minutes over a 30 % lossy path: keepalives are retried until
// answered, well inside the idle timeout.
func TestKeepAliveOverLoss(t *testing.T) {
	net := lossy.Config{Up: impaired(0.3), Down: impaired(0.3)}
	s := newSim(t, 23, Config{}, net)
	c := s.addClient(Config{})
	s.established()
	s.runUntil(s.now.Add(10*time.Minute), func() bool { return c.State() != StateEstablished })
	if c.State() != StateEstablished || s.ep.Stats().Sessions != 1 {
		t.Fatalf("idle session died: %v", c.Err())
	}
	if p := c.Stats().ProbesSent; p < uint64(10*time.Minute/DefaultKeepAlive) {
		t.Fatalf("%d keepalives in 10 minutes", p)
	}
}

// TestRebindingMidStream: the client's NAT gives it a new port in the
// middle of a stream. The session follows (found by id), the new path is
// validated by a challenge, and no message is lost or repeated.
func TestRebindingMidStream(t *testing.T) {
	st := newStream(t, 24, lossy.Config{Up: impaired(0.05), Down: impaired(0.05)}, 400, 20*time.Millisecond)
	st.runUntil(st.now.Add(4*time.Second), nil)
	old := st.net.Outside(st.c.addr)
	fresh := st.net.Rebind(st.c.addr)
	st.finish(400)
	sc := st.ep.Session(st.c.ID())
	if sc == nil {
		t.Fatal("session lost")
	}
	if sc.Peer() != fresh || sc.Stats().Migrations != 1 || sc.Stats().PathChallenges == 0 {
		t.Fatalf("peer %v (old %v, new %v), %d migrations, %d challenges", sc.Peer(), old, fresh, sc.Stats().Migrations, sc.Stats().PathChallenges)
	}
	if st.net.Stats().NATDrops == 0 {
		t.Fatal("nothing went to the old mapping: the rebinding was not exercised mid-stream")
	}
}

// TestRebindingAfterBackoff: the server's data to a client went
// unanswered long enough to back its retransmission timer off to the
// cap, and meanwhile the client's NAT gave it a new port. The client's
// next packet makes that port the candidate, whose credit holds the data
// back until it answers a challenge; the first challenge is lost. The
// challenge is retried on the path's own round-trip estimate, not on the
// data's backed-off timer, and once the path is validated the data goes
// at once. (Retried at the backed-off two seconds, five lost challenges
// took ten seconds, and a client with nothing more to say waited for its
// keepalive: the gateway's lossy relay test stalled about once in a
// hundred runs.)
func TestRebindingAfterBackoff(t *testing.T) {
	s := newSim(t, 27, Config{}, noImpairment())
	c := s.addClient(Config{})
	s.established()
	sc := s.ep.Session(c.ID())
	const total = 50
	for i := range total {
		if err := sc.Send(testMessage(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	s.net.SetImpairment(false, lossy.Impairment{Loss: 1})
	s.runUntil(s.now.Add(8*time.Second), nil)
	if sc.rtt.backoff < 3 {
		t.Fatalf("backoff %d after 8 s of silence: the setup did not back the timer off", sc.rtt.backoff)
	}
	fresh := s.net.Rebind(c.addr)
	if err := c.Send([]byte("from the new port")); err != nil {
		t.Fatal(err)
	}
	s.runUntil(s.now.Add(time.Second), func() bool { return sc.Stats().PathChallenges > 0 })
	if !sc.path.candActive || sc.Stats().PathChallenges != 1 { // its first challenge is lost
		t.Fatalf("no candidate after the rebinding: %s", sc.debugString())
	}
	s.runUntil(s.now.Add(50*time.Millisecond), nil)
	s.net.SetImpairment(false, lossy.Impairment{})
	healed := s.now
	s.runUntil(s.now.Add(time.Minute), func() bool { return len(c.received) == total })
	if err := checkStream(c.received, 1, total); err != nil {
		t.Fatal(err)
	}
	if sc.Peer() != fresh || sc.Stats().Migrations != 1 {
		t.Fatalf("peer %v (want %v), %d migrations", sc.Peer(), fresh, sc.Stats().Migrations)
	}
	// Virtual time: MinRTO for the second challenge, a round trip, and the
	// data's transmission; the backed-off timer alone is 2 s.
	t.Logf("healed after %v", s.now.Sub(healed))
	if took := s.now.Sub(healed); took > time.Second {
		t.Fatalf("the data reached the new port %v after the path healed", took)
	}
}

// TestUnvalidatedPathAmplification: a packet of a session, forged from
// another address, makes the server send there no more than three times
// what came from there, while it has plenty to send; the real client,
// still at its address, keeps the session.
func TestUnvalidatedPathAmplification(t *testing.T) {
	s := newSim(t, 25, Config{}, noImpairment())
	var got [][]byte
	s.onServerMessage = func(_ *Conn, m []byte) { got = append(got, m) }
	c := s.addClient(Config{})
	s.established()
	sc := s.ep.Session(c.ID())
	for i := 0; i < 100; i++ {
		if err := sc.Send(bytes.Repeat([]byte{byte(i)}, 2000)); err != nil {
			t.Fatal(err)
		}
	}
	// A copy of the client's next packet, sent first from elsewhere.
	out, ok := c.AppendDatagram(nil, s.now)
	if !ok {
		if err := c.Send([]byte("x")); err != nil {
			t.Fatal(err)
		}
		out, _ = c.AppendDatagram(nil, s.now)
	}
	attacker := netip.MustParseAddrPort("10.66.0.1:9")
	s.recvFrom[attacker] += len(out)
	s.ep.Input(attacker, out, s.now)
	s.flush()
	if s.sentTo[attacker] > 3*s.recvFrom[attacker] || s.sentTo[attacker] == 0 {
		t.Fatalf("sent %d bytes to an unvalidated address that sent %d", s.sentTo[attacker], s.recvFrom[attacker])
	}
	s.runUntil(s.now.Add(20*time.Second), func() bool { return len(c.received) == 100 })
	if s.sentTo[attacker] > 3*s.recvFrom[attacker] {
		t.Fatalf("sent %d bytes to an unvalidated address that sent %d", s.sentTo[attacker], s.recvFrom[attacker])
	}
	if len(c.received) != 100 || sc.Peer() != c.addr || sc.Stats().Migrations != 0 {
		t.Fatalf("%d messages, peer %v, %d migrations", len(c.received), sc.Peer(), sc.Stats().Migrations)
	}
}

// TestSpoofedFlood: 100,000 INITIALs (and DATA for random sessions) from
// random spoofed sources create no session, no per-source state, and get
// at most three times their bytes back.
func TestSpoofedFlood(t *testing.T) {
	s := newSim(t, 26, Config{}, noImpairment())
	r := rand.New(rand.NewPCG(1, 2))
	in, out := 0, 0
	hello := &helloFrame{maxDatagram: 1200, window: 256, idleMillis: 30000}
	for i := 0; i < 100_000; i++ {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, byte(r.IntN(256)), byte(r.IntN(256))}), uint16(r.IntN(65536)))
		var d []byte
		switch i % 3 {
		case 0: // a minimal INITIAL
			d = appendCRC(appendHello(AppendHeader(nil, Header{Type: TypeInitial, SessionID: r.Uint64() | 1}), hello), 0)
		case 1: // an INITIAL with a made-up cookie
			h := *hello
			h.cookie = make([]byte, cookieLen)
			binaryPut(h.cookie, r.Uint64())
			d = appendCRC(appendHello(AppendHeader(nil, Header{Type: TypeInitial, SessionID: r.Uint64() | 1}), &h), 0)
		default: // DATA for a guessed session
			d = appendCRC(append(AppendHeader(nil, Header{Type: TypeData, SessionID: r.Uint64() | 1}), framePing), 0)
		}
		in += len(d)
		s.ep.Input(from, d, s.now)
		if st := s.ep.Stats(); st.PendingResponses > s.ep.cfg.PendingRetries {
			t.Fatalf("%d pending replies", st.PendingResponses)
		}
		if i%100 == 99 {
			for {
				b, _, ok := s.ep.AppendDatagram(s.buf[:0], s.now)
				if !ok {
					break
				}
				out += len(b)
			}
		}
	}
	st := s.ep.Stats()
	if st.Sessions != 0 || len(s.ep.handshakes) != 0 || s.ep.wheel.count != 0 || st.MemoryInUse != 0 || st.SessionsOpened != 0 {
		t.Fatalf("state after the flood: %+v, %d handshakes, %d timers", st, len(s.ep.handshakes), s.ep.wheel.count)
	}
	if out > 3*in || st.Retries == 0 || st.BadCookies == 0 || st.UnknownSessions == 0 {
		t.Fatalf("in %d bytes, out %d; %+v", in, out, st)
	}
	t.Logf("flood: %d bytes in, %d out (%.2fx); %+v", in, out, float64(out)/float64(in), st)
}

func binaryPut(b []byte, v uint64) {
	for i := range b {
		b[i] = byte(v >> (8 * (i % 8)))
	}
}

// TestLateInitialMakesNoSecondSession: a copy of the client's INITIAL
// that arrives after the session is in use (the network duplicated it,
// or an on-path attacker replays it), while its cookie is still valid,
// gets the same session's ACCEPT again, not a second session.
func TestLateInitialMakesNoSecondSession(t *testing.T) {
	s := newSim(t, 27, Config{}, noImpairment())
	var initials [][]byte
	s.tap = func(up bool, b []byte) {
		if h, err := ParseHeader(b); err == nil && up && h.Type == TypeInitial {
			initials = append(initials, append([]byte(nil), b...))
		}
	}
	var got int
	s.onServerMessage = func(*Conn, []byte) { got++ }
	c := s.addClient(Config{})
	s.established()
	for i := 0; i < 5; i++ {
		if err := c.Send([]byte("data")); err != nil {
			t.Fatal(err)
		}
		s.runUntil(s.now.Add(time.Second), nil)
	}
	if got != 5 || len(initials) != 2 {
		t.Fatalf("%d messages, %d INITIALs", got, len(initials))
	}
	for _, d := range initials {
		s.ep.Input(c.addr, d, s.now)
	}
	s.runUntil(s.now.Add(time.Second), nil)
	if st := s.ep.Stats(); st.Sessions != 1 || st.SessionsOpened != 1 || c.State() != StateEstablished {
		t.Fatalf("%+v; client %v", st, c.State())
	}
}

// TestDatagramOnlyClientStaysAlive: a client that only sends unreliable
// telemetry (which asks for no ACK) still hears from its server, through
// its keepalives, and keeps its session for minutes; every datagram of a
// clean path arrives.
func TestDatagramOnlyClientStaysAlive(t *testing.T) {
	s := newSim(t, 28, Config{}, noImpairment())
	got := 0
	s.ep.opts.OnReadable = func(c *Conn) {
		for {
			if _, ok := c.ReadDatagram(nil); !ok {
				return
			}
			got++
		}
	}
	c := s.addClient(Config{})
	s.established()
	next, sent := s.now, 0
	stop := s.now.Add(3 * time.Minute)
	s.wake = func() time.Time {
		if !next.Before(stop) {
			return time.Time{}
		}
		return next
	}
	s.app = func(now time.Time) {
		for !now.Before(next) && next.Before(stop) {
			if err := c.SendUnreliable([]byte("t=21.5")); err != nil {
				t.Fatal(err)
			}
			sent++
			next = next.Add(time.Second)
		}
	}
	s.runUntil(stop.Add(time.Second), func() bool { return c.State() != StateEstablished })
	if c.State() != StateEstablished || s.ep.Stats().Sessions != 1 {
		t.Fatalf("session died after %v: %v", s.now.Sub(simStart), c.Err())
	}
	if got != sent {
		t.Fatalf("%d of %d datagrams arrived", got, sent)
	}
}
