package rudp

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/edgemux/edgemux/protocols"
)

// lineProto is a stream protocol for the tests: newline-terminated lines,
// each answered uppercased; "BYE" is answered "GOODBYE" and ends the
// session; Notified writes "NOTE", Drain writes "DRAIN" and ends it.
type lineProto struct {
	conns  []protocols.Conn
	closed []error
}

type lineSession struct {
	p *lineProto
	c protocols.Conn
}

func (p *lineProto) Open(c protocols.Conn) (protocols.Session, error) {
	p.conns = append(p.conns, c)
	return &lineSession{p: p, c: c}, nil
}

var errBye = errors.New("bye")

func (s *lineSession) Data(in []byte) (int, error) {
	used := 0
	for {
		i := bytes.IndexByte(in[used:], '\n')
		if i < 0 {
			return used, nil
		}
		line := string(in[used : used+i])
		used += i + 1
		if line == "BYE" {
			s.c.Write([]byte("GOODBYE\n"))
			return used, errBye
		}
		s.c.Write([]byte(strings.ToUpper(line) + "\n"))
	}
}

func (s *lineSession) Closed(err error) { s.p.closed = append(s.p.closed, err) }
func (s *lineSession) Notified() error  { return s.c.Write([]byte("NOTE\n")) }
func (s *lineSession) Drain() error     { s.c.Write([]byte("DRAIN\n")); return protocols.ErrShutdown }

// newStreamShell is a shell whose handler runs lineProto over its sessions.
func newStreamShell(t *testing.T, opts StreamOptions) (*shell, *lineProto, *Streams) {
	p := &lineProto{}
	h, st, err := NewStreamHandler(Config{}, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := newShellWith(t, h, 1)
	s.pump()
	if s.c.State() != StateEstablished || len(p.conns) != 1 {
		t.Fatalf("client %v, %d sessions", s.c.State(), len(p.conns))
	}
	return s, p, st
}

// readStream is everything the client has received on the stream.
func (s *shell) readStream() string {
	var b []byte
	for {
		m, ok := s.c.ReadMessage(b)
		if !ok {
			return string(b)
		}
		b = m
	}
}

// TestStreamCarriesFrames: a line split over three messages is one line;
// two lines in one message are two answers; an unreliable datagram with
// whole lines is served and one ending in a partial line is counted.
func TestStreamCarriesFrames(t *testing.T) {
	s, p, st := newStreamShell(t, StreamOptions{})
	for _, m := range []string{"hel", "lo wor", "ld\nsecond\nthird\n"} {
		s.c.Send([]byte(m))
	}
	s.pump()
	if got := s.readStream(); got != "HELLO WORLD\nSECOND\nTHIRD\n" {
		t.Fatalf("answers %q", got)
	}
	s.c.SendUnreliable([]byte("telemetry\nhalf"))
	s.pump()
	if got := s.readStream(); got != "TELEMETRY\n" || st.Stats().Fragmented != 1 {
		t.Fatalf("after a datagram: %q, %+v", got, st.Stats())
	}
	if len(p.closed) != 0 || st.Stats().Open != 1 {
		t.Fatalf("closed %v, %+v", p.closed, st.Stats())
	}
}

// TestStreamCloseWaitsForTheGoodbye: the session answers BYE with GOODBYE
// and closes; while the client does not acknowledge (its packets are
// lost), the server retransmits the GOODBYE and sends no CLOSE; once they
// get through, the client reads GOODBYE, then the CLOSE ends it. Before
// the linger, CLOSE went out at once and the unacknowledged GOODBYE with
// it.
func TestStreamCloseWaitsForTheGoodbye(t *testing.T) {
	s, p, st := newStreamShell(t, StreamOptions{})
	s.c.Send([]byte("BYE\n"))
	// One flight to the server; its answers are lost, and so is every
	// client packet for the next 2 s.
	for {
		out, ok := s.c.AppendDatagram(nil, s.now)
		if !ok {
			break
		}
		s.workers[0].Datagrams([]protocols.Datagram{{Peer: s.addr, Data: out}}, s.now)
	}
	if len(p.closed) != 1 || !errors.Is(p.closed[0], errBye) {
		t.Fatalf("the session was not told Closed(bye): %v", p.closed)
	}
	for range 200 {
		s.outs[0].sent = s.outs[0].sent[:0]
		s.now = s.now.Add(10e6)
		s.workers[0].Tick(s.now)
		s.c.Tick(s.now)
		for {
			if _, ok := s.c.AppendDatagram(nil, s.now); !ok {
				break
			}
		}
	}
	if st.Stats().Open != 1 {
		t.Fatal("the session ended before its GOODBYE was acknowledged")
	}
	// The path is back: the server's next retransmission (its backoff
	// is capped at max_rto, 2 s) gets through.
	got := ""
	for range 300 {
		s.pump()
		if got += s.readStream(); got != "" {
			break
		}
		s.now = s.now.Add(10e6)
		s.workers[0].Tick(s.now)
	}
	if got != "GOODBYE\n" {
		t.Fatalf("client read %q", got)
	}
	s.pump()
	if s.c.State() != StateClosed || !errors.Is(s.c.Err(), ErrPeerClosed) || st.Stats().Open != 0 {
		t.Fatalf("client %v (%v), %d open", s.c.State(), s.c.Err(), st.Stats().Open)
	}
}

// TestStreamNotifyAndDrain: Notify from another goroutine wakes the worker
// (DatagramOut.Wake) and Woken runs Notified; Drain gives the session its
// Drain, whose goodbye is delivered before the session ends, and then the
// worker reports Drained.
func TestStreamNotifyAndDrain(t *testing.T) {
	s, p, _ := newStreamShell(t, StreamOptions{})
	done := make(chan struct{})
	go func() { p.conns[0].Notify(); p.conns[0].Notify(); close(done) }()
	<-done
	if s.outs[0].wakes != 1 {
		t.Fatalf("%d wakes for two coalesced Notify calls", s.outs[0].wakes)
	}
	w := s.workers[0]
	w.(protocols.DatagramWaker).Woken(s.now)
	s.pump()
	if got := s.readStream(); got != "NOTE\n" {
		t.Fatalf("after Notify the client read %q", got)
	}
	d := w.(protocols.DatagramDrainer)
	if d.Drained() {
		t.Fatal("drained with a session open")
	}
	d.Drain(s.now)
	s.pump()
	if got := s.readStream(); got != "DRAIN\n" {
		t.Fatalf("after Drain the client read %q", got)
	}
	s.pump()
	if !d.Drained() || s.c.State() != StateClosed {
		t.Fatalf("drained %v, client %v", d.Drained(), s.c.State())
	}
}

// TestStreamInputLimit: a line longer than MaxInput without its newline
// closes the session as malformed, and is counted.
func TestStreamInputLimit(t *testing.T) {
	s, p, st := newStreamShell(t, StreamOptions{MaxInput: 64})
	s.c.Send(bytes.Repeat([]byte("x"), 40))
	s.c.Send(bytes.Repeat([]byte("y"), 40))
	s.pump()
	if len(p.closed) != 1 || !errors.Is(p.closed[0], protocols.ErrMalformed) || st.Stats().BadInput != 1 {
		t.Fatalf("closed %v, %+v", p.closed, st.Stats())
	}
}
