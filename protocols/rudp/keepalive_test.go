package rudp

import (
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// TestQuietKeepalivesKeepTheSession: an idle client's keepalives ask for
// no answer while it has heard the server within the idle timeout less
// one keepalive interval. Over ten idle minutes the server answers at
// most every other keepalive, and neither side dies for the keepalives it
// sent unanswered. (Before quiet keepalives the server answered every
// one: as many datagrams down as up.) The answers it does send leave on
// pingAckGrain boundaries of its clock, where other idle sessions'
// answers leave too: one wakeup and one send batch for all of them.
func TestQuietKeepalivesKeepTheSession(t *testing.T) {
	s := newSim(t, 41, Config{}, noImpairment())
	c := s.addClient(Config{})
	s.established()
	var up, down, pings, unaligned int
	s.tap = func(isUp bool, b []byte) {
		if !isUp {
			down++
			if s.now.Sub(s.ep.epoch)%pingAckGrain != 0 {
				unaligned++
			}
			return
		}
		up++
		if h, err := ParseHeader(b); err == nil && h.Type == TypeData {
			body, err := checkCRC(b)
			if err == nil && containsFrame(body[HeaderLen:], framePing) {
				pings++
			}
		}
	}
	s.runUntil(s.now.Add(10*time.Minute), func() bool { return c.State() != StateEstablished })
	if c.State() != StateEstablished || s.ep.Stats().Sessions != 1 {
		t.Fatalf("idle session died: %v, %d server sessions", c.Err(), s.ep.Stats().Sessions)
	}
	if want := int(10*time.Minute/DefaultKeepAlive) - 1; up < want {
		t.Fatalf("%d keepalives in 10 minutes, want at least %d", up, want)
	}
	if pings == 0 || pings > (up+1)/2 {
		t.Fatalf("%d of %d keepalives asked for an answer, want at most half and some", pings, up)
	}
	if down > pings {
		t.Fatalf("the server sent %d datagrams for %d pings (%d keepalives)", down, pings, up)
	}
	if unaligned != 0 {
		t.Fatalf("%d of %d keepalive answers off the %v grain", unaligned, down, pingAckGrain)
	}
}

// TestKeepaliveBeat: an idle client sends one datagram a keepalive
// interval, every other one asking, and the server answers each ask
// once: at the defaults and at the large-fleet setting, ten idle minutes
// cost at most one datagram up per interval and one down per two. (The
// ask used to fall due a round trip after the quiet keepalive of its
// beat and went out on its own: 87 up and 29 down at the defaults, 33
// and 11 at 25 s / 75 s.)
func TestKeepaliveBeat(t *testing.T) {
	for _, cfg := range []Config{{}, {KeepAlive: 25 * time.Second, IdleTimeout: 75 * time.Second}} {
		s := newSim(t, 41, cfg, noImpairment())
		c := s.addClient(cfg)
		s.established()
		var up, down int
		s.tap = func(isUp bool, _ []byte) {
			if isUp {
				up++
			} else {
				down++
			}
		}
		const idle = 10 * time.Minute
		s.runUntil(s.now.Add(idle), func() bool { return c.State() != StateEstablished })
		if c.State() != StateEstablished {
			t.Fatalf("keepalive %v: idle session died: %v", c.keepAlive, c.Err())
		}
		beats := int(idle / c.keepAlive)
		if up > beats || down > (beats+1)/2 || down == 0 {
			t.Errorf("keepalive %v: %d datagrams up and %d down in %v, want at most %d and %d", c.keepAlive, up, down, idle, beats, (beats+1)/2)
		}
	}
}

// TestKeepaliveAnswerWithoutTheServer: a client whose server stops
// answering (every datagram toward the client lost) asks again, and
// dies at the idle timeout after it last heard the server, not before: a
// quiet keepalive going unanswered is no sign of death.
func TestKeepaliveAnswerWithoutTheServer(t *testing.T) {
	s := newSim(t, 42, Config{}, noImpairment())
	c := s.addClient(Config{})
	s.established()
	s.runUntil(s.now.Add(3*time.Minute), nil)
	heard := c.epoch.Add(time.Duration(c.lastHeard))
	s.net.SetImpairment(false, lossy.Impairment{Loss: 1})
	death := heard.Add(DefaultIdleTimeout)
	s.runUntil(death.Add(-time.Second), nil)
	if c.State() != StateEstablished {
		t.Fatalf("client dead %v after it last heard the server: %v", s.now.Sub(heard), c.Err())
	}
	if sc := s.ep.Session(c.ID()); sc == nil || sc.State() != StateEstablished {
		t.Fatal("the server lost a session whose client keeps sending")
	}
	s.runUntil(death.Add(time.Second), nil)
	if c.State() == StateEstablished {
		t.Fatal("client alive past its idle timeout without a word from the server")
	}
}

// containsFrame reports whether plain frames b hold a frame of type typ.
func containsFrame(b []byte, typ byte) bool {
	var f frame
	for len(b) > 0 {
		rest, err := parseFrame(b, &f)
		if err != nil {
			return false
		}
		if f.typ == typ {
			return true
		}
		b = rest
	}
	return false
}

// TestIdleEndpoint: Endpoint.Idle, which the gateway reads to take its
// longer receive step, says idle for an endpoint whose sessions only
// keep alive, and busy for busyFor after a reliable message, an
// unreliable one or a client's INITIAL. It checks every 100 ms over a
// minute of keepalives (six of them, quiet and asking alike).
func TestIdleEndpoint(t *testing.T) {
	s := newSim(t, 43, Config{}, noImpairment())
	c := s.addClient(Config{})
	if s.ep.Idle(s.now) {
		t.Fatal("idle in its first second")
	}
	s.established()
	if s.ep.Idle(s.now) {
		t.Fatal("idle right after a handshake")
	}
	up := 0
	s.tap = func(isUp bool, _ []byte) {
		if isUp {
			up++
		}
	}
	s.runUntil(s.now.Add(busyFor+100*time.Millisecond), nil)
	for end := s.now.Add(time.Minute); s.now.Before(end); {
		s.runUntil(s.now.Add(100*time.Millisecond), nil)
		if !s.ep.Idle(s.now) {
			t.Fatalf("busy at %v with keepalives only (%d sent)", s.now.Sub(simStart), up)
		}
	}
	if up < 5 {
		t.Fatalf("%d keepalives in a minute", up)
	}

	busyFrom := func(what string, start func()) {
		t.Helper()
		start()
		s.flush()
		s.runUntil(s.now.Add(100*time.Millisecond), nil)
		from := s.now
		for s.now.Sub(from) < busyFor-200*time.Millisecond {
			if s.ep.Idle(s.now) {
				t.Fatalf("after %s: idle %v later", what, s.now.Sub(from))
			}
			s.runUntil(s.now.Add(100*time.Millisecond), nil)
		}
		s.runUntil(s.now.Add(busyFor), nil)
		if !s.ep.Idle(s.now) {
			t.Fatalf("after %s: still busy %v later", what, s.now.Sub(from))
		}
	}
	busyFrom("a reliable message", func() {
		if err := c.Send([]byte("telemetry")); err != nil {
			t.Fatal(err)
		}
	})
	busyFrom("an unreliable message", func() {
		if err := c.SendUnreliable([]byte("telemetry")); err != nil {
			t.Fatal(err)
		}
	})
	busyFrom("a new client's INITIAL", func() { s.addClient(Config{}) })
}
