package rudp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols"
)

// fakeOut records what a worker sends.
type fakeOut struct {
	sent  []sentDatagram
	wakes int
}

type sentDatagram struct {
	to netip.AddrPort
	b  []byte
}

func (o *fakeOut) Wake() { o.wakes++ }

func (o *fakeOut) Send(to netip.AddrPort, b []byte) error {
	o.sent = append(o.sent, sentDatagram{to, append([]byte(nil), b...)})
	return nil
}

// echoApp echoes every message and datagram, and panics on "boom".
type echoApp struct {
	opened, closed int
	messages       []string
	datagrams      []string
	closedErr      error
}

func (a *echoApp) Opened(*Conn) { a.opened++ }
func (a *echoApp) Message(c *Conn, m []byte) {
	if string(m) == "boom" {
		panic("the application broke")
	}
	a.messages = append(a.messages, string(m))
	c.Send(m)
}
func (a *echoApp) Datagram(c *Conn, m []byte) {
	a.datagrams = append(a.datagrams, string(m))
	c.SendUnreliable(m)
}
func (a *echoApp) Closed(_ *Conn, err error) { a.closed++; a.closedErr = err }

// shell is a Handler with its workers and a client, wired by hand the
// way the gateway wires them: Route picks the worker of each datagram.
type shell struct {
	t       *testing.T
	h       *Handler
	workers []protocols.DatagramWorker
	outs    []*fakeOut
	c       *Client
	addr    netip.AddrPort
	now     time.Time
	hits    []int // datagrams per worker
}

func newShell(t *testing.T, app App, workers int) *shell {
	h, err := NewHandler(Config{}, app)
	if err != nil {
		t.Fatal(err)
	}
	return newShellWith(t, h, workers)
}

func newShellWith(t *testing.T, h *Handler, workers int) *shell {
	var err error
	s := &shell{t: t, h: h, addr: netip.MustParseAddrPort("192.0.2.7:5683"), now: time.Now(), hits: make([]int, workers)}
	for i := 0; i < workers; i++ {
		out := &fakeOut{}
		s.outs = append(s.outs, out)
		s.workers = append(s.workers, h.Worker(i, workers, out))
	}
	if s.c, err = NewClient(Config{}, nil, s.now); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, w := range s.workers {
			w.Close()
		}
	})
	return s
}

// pump carries datagrams both ways until both sides are quiet.
func (s *shell) pump() {
	for round := 0; round < 20; round++ {
		moved := false
		for {
			out, ok := s.c.AppendDatagram(nil, s.now)
			if !ok {
				break
			}
			w := s.h.Route(s.addr, out, len(s.workers))
			s.hits[w]++
			s.workers[w].Datagrams([]protocols.Datagram{{Peer: s.addr, Data: out}}, s.now)
			moved = true
		}
		for _, o := range s.outs {
			for _, d := range o.sent {
				if d.to == s.addr {
					s.c.Input(d.b, s.now)
				}
				moved = true
			}
			o.sent = o.sent[:0]
		}
		s.now = s.now.Add(3 * time.Millisecond)
		for _, w := range s.workers {
			if d := w.Tick(s.now); d < 0 {
				s.t.Fatalf("Tick asks to come back in %v", d)
			}
		}
		s.c.Tick(s.now)
		if !moved && round > 2 {
			return
		}
	}
}

// TestHandlerCarriesMessages: through Route and the workers, a client
// opens a session on one worker (the same for every datagram, before and
// after a rebinding), its messages and datagrams reach the App and come
// back, a panicking App closes that session only, and Closed is called.
func TestHandlerCarriesMessages(t *testing.T) {
	app := &echoApp{}
	s := newShell(t, app, 3)
	s.pump()
	if s.c.State() != StateEstablished || app.opened != 1 {
		t.Fatalf("client %v, %d opened", s.c.State(), app.opened)
	}
	owner := -1
	for w, n := range s.hits {
		if n > 0 && owner >= 0 {
			t.Fatalf("datagrams reached workers %d and %d", owner, w)
		}
		if n > 0 {
			owner = w
		}
	}
	for _, m := range []string{"one", "two"} {
		if err := s.c.Send([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.c.SendUnreliable([]byte("t=21.5")); err != nil {
		t.Fatal(err)
	}
	s.pump()
	s.addr = netip.MustParseAddrPort("192.0.2.7:40000") // the NAT rebinds
	if err := s.c.Send([]byte("three")); err != nil {
		t.Fatal(err)
	}
	s.pump()
	var echoed []string
	for {
		m, ok := s.c.ReadMessage(nil)
		if !ok {
			break
		}
		echoed = append(echoed, string(m))
	}
	d, _ := s.c.ReadDatagram(nil)
	if len(echoed) != 3 || echoed[2] != "three" || string(d) != "t=21.5" || len(app.datagrams) != 1 {
		t.Fatalf("echoed %q, datagram %q, app %q %q", echoed, d, app.messages, app.datagrams)
	}
	for w, n := range s.hits {
		if w != owner && n > 0 {
			t.Fatalf("after the rebinding a datagram went to worker %d, not %d", w, owner)
		}
	}
	if err := s.c.Send([]byte("boom")); err != nil {
		t.Fatal(err)
	}
	s.pump()
	if s.h.Stats().Panics != 1 || app.closed != 1 || s.c.State() != StateClosed {
		t.Fatalf("after a panic: %+v, %d closed, client %v", s.h.Stats(), app.closed, s.c.State())
	}
}
