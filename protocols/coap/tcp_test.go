package coap

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	tcpcoder "github.com/plgd-dev/go-coap/v3/tcp/coder"

	"github.com/edgemux/edgemux/protocols"
)

// fakeConn is a protocols.Conn that keeps what is written.
type fakeConn struct {
	out      []byte
	closed   error
	notifies int
}

func (c *fakeConn) ID() uint64               { return 1 }
func (c *fakeConn) Peer() netip.AddrPort     { return peerA }
func (c *fakeConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (c *fakeConn) Write(p []byte) error     { c.out = append(c.out, p...); return nil }
func (c *fakeConn) Buffered() int            { return 0 }
func (c *fakeConn) Close(reason error)       { c.closed = reason }
func (c *fakeConn) SetTimer(time.Duration)   {}
func (c *fakeConn) CountDropped(int)         {}
func (c *fakeConn) Notify()                  { c.notifies++ }
func (c *fakeConn) take(t *testing.T) []message.Message {
	t.Helper()
	var ms []message.Message
	for out := c.out; len(out) > 0; {
		m := message.Message{Options: make(message.Options, 0, 16)}
		n, err := tcpcoder.DefaultCoder.Decode(out, &m)
		if err != nil {
			t.Fatalf("written % x: %v", c.out, err)
		}
		ms = append(ms, m)
		out = out[n:]
	}
	c.out = nil
	return ms
}

func tcpFrame(t *testing.T, m message.Message) []byte {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := tcpcoder.DefaultCoder.Encode(m, buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// TestTCPSignalling: the server's CSM comes first with Max-Message-Size
// and Block-Wise-Transfer; a request before the client's CSM is an Abort;
// Ping gets Pong with its token; Release ends the connection.
func TestTCPSignalling(t *testing.T) {
	tb := newTestbed(t, Config{})
	c := &fakeConn{}
	sess, _ := tb.h.Open(c)
	ms := c.take(t)
	if len(ms) != 1 || ms[0].Code != codes.CSM || !ms[0].Options.HasOption(optBlockWise) {
		t.Fatalf("first message %v, want a CSM", ms)
	}
	if v, _ := ms[0].Options.GetUint32(optMaxMessageSize); v != uint32(tb.h.Config().TCPMaxMessage) {
		t.Errorf("Max-Message-Size %d", v)
	}
	get := tcpFrame(t, message.Message{Code: codes.GET, Token: []byte("g"), Options: message.Options{{ID: message.URIPath, Value: []byte("t")}, {ID: message.URIPath, Value: []byte("x")}}})
	if _, err := sess.Data(get); !errors.Is(err, protocols.ErrMalformed) {
		t.Errorf("request before CSM: %v, want malformed", err)
	}
	if ms := c.take(t); len(ms) != 1 || ms[0].Code != codes.Abort {
		t.Errorf("request before CSM answered %v, want Abort", ms)
	}

	sess, _ = tb.h.Open(c)
	c.take(t)
	tb.publish("x", "42")
	in := append(tcpFrame(t, message.Message{Code: codes.CSM}), tcpFrame(t, message.Message{Code: codes.Ping, Token: []byte("pp")})...)
	in = append(in, get...)
	in = append(in, tcpFrame(t, message.Message{Code: codes.Release})...)
	n, err := sess.Data(in)
	if !errors.Is(err, ErrReleased) || n != len(in) {
		t.Fatalf("Data = %d, %v; want all consumed and released", n, err)
	}
	ms = c.take(t)
	if len(ms) != 2 || ms[0].Code != codes.Pong || string(ms[0].Token) != "pp" || ms[1].Code != codes.Content || string(ms[1].Payload) != "42" {
		t.Fatalf("answers %v", ms)
	}
	// A partial message waits for the rest.
	sess, _ = tb.h.Open(c)
	csm := tcpFrame(t, message.Message{Code: codes.CSM})
	if n, err := sess.Data(append(csm, get[:3]...)); err != nil || n != len(csm) {
		t.Errorf("partial message: consumed %d, %v", n, err)
	}
}

// TestTCPObserve: notifications over TCP, with rising Observe numbers.
func TestTCPObserve(t *testing.T) {
	tb := newTestbed(t, Config{})
	tb.publish("x", "0")
	c := &fakeConn{}
	sess, _ := tb.h.Open(c)
	reg := message.Message{Code: codes.GET, Token: []byte("o"), Options: message.Options{{ID: message.Observe}, {ID: message.URIPath, Value: []byte("t")}, {ID: message.URIPath, Value: []byte("x")}}}
	if _, err := sess.Data(append(tcpFrame(t, message.Message{Code: codes.CSM}), tcpFrame(t, reg)...)); err != nil {
		t.Fatal(err)
	}
	c.take(t)
	last := uint32(0)
	for _, v := range []string{"1", "2", "3"} {
		if err := tb.bus.Publish("x", []byte(v), "test"); err != nil {
			t.Fatal(err)
		}
		if err := sess.(protocols.Notified).Notified(); err != nil {
			t.Fatal(err)
		}
		ms := c.take(t)
		if len(ms) != 1 || string(ms[0].Payload) != v {
			t.Fatalf("notification %v, want %s", ms, v)
		}
		if seq := observeOf(t, ms[0]); seq <= last {
			t.Fatalf("Observe %d after %d", seq, last)
		} else {
			last = seq
		}
	}
	sess.Closed(nil)
	if tb.bus.Stats().Subscribers != 0 {
		t.Errorf("subscriber left after close")
	}
}
