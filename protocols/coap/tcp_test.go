package coap

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	tcpcoder "github.com/plgd-dev/go-coap/v3/tcp/coder"

	"github.com/edgemux/edgemux/protocols"
)

// fakeConn is a protocols.Conn that keeps what is written. The panicOn
// fields make a call panic, as a bug in the session's path would.
type fakeConn struct {
	out      []byte
	closed   error
	notifies int

	panicOnNotify, panicOnBuffered, panicOnWrite bool
}

func (c *fakeConn) ID() uint64               { return 1 }
func (c *fakeConn) Peer() netip.AddrPort     { return peerA }
func (c *fakeConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (c *fakeConn) Close(reason error)       { c.closed = reason }
func (c *fakeConn) SetTimer(time.Duration)   {}
func (c *fakeConn) CountDropped(int)         {}

func (c *fakeConn) Write(p []byte) error {
	if c.panicOnWrite {
		panic("write exploded")
	}
	c.out = append(c.out, p...)
	return nil
}

func (c *fakeConn) Buffered() int {
	if c.panicOnBuffered {
		panic("buffered exploded")
	}
	return 0
}

func (c *fakeConn) Notify() {
	if c.panicOnNotify {
		panic("notify exploded")
	}
	c.notifies++
}

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

// TestTCPPanicIsAnswered: a session that panics while it serves a request
// closes its connection with ErrPanic, and the peer is told first, in
// CoAP's words, rather than meeting a bare close: what was written before
// stays, then a 5.00 with the request's token, then an Abort, and nothing
// after. The subscriber the broken request made goes with the connection.
func TestTCPPanicIsAnswered(t *testing.T) {
	tb := newTestbed(t, Config{})
	var logged bytes.Buffer
	tb.h.srv.log = slog.New(slog.NewJSONHandler(&logged, nil))
	tb.publish("p/x", "1") // the filter's replay will wake the connection: Notify
	c := &fakeConn{}
	sess, _ := tb.h.Open(c)
	c.take(t)
	c.panicOnNotify = true
	observe := message.Message{Code: codes.GET, Token: []byte("tk"), Options: message.Options{
		{ID: message.Observe}, {ID: message.URIPath, Value: []byte("t")}, {ID: message.URIPath, Value: []byte("p")}, {ID: message.URIPath, Value: []byte("+")},
	}}
	in := append(tcpFrame(t, message.Message{Code: codes.CSM}), tcpFrame(t, message.Message{Code: codes.Ping, Token: []byte("pp")})...)
	in = append(in, tcpFrame(t, observe)...)
	_, err := sess.Data(in)
	if !errors.Is(err, ErrPanic) {
		t.Fatalf("Data = %v, want ErrPanic", err)
	}
	ms := c.take(t)
	if len(ms) != 3 || ms[0].Code != codes.Pong || string(ms[0].Token) != "pp" {
		t.Fatalf("peer got %v, want Pong, 5.00, Abort", ms)
	}
	if m := ms[1]; m.Code != codes.InternalServerError || string(m.Token) != "tk" || string(m.Payload) != "internal error" {
		t.Errorf("answer to the request %v, want 5.00 with token tk and a diagnostic", m)
	}
	if m := ms[2]; m.Code != codes.Abort || len(m.Token) != 0 || string(m.Payload) != "internal error" {
		t.Errorf("last message %v, want Abort with a diagnostic", m)
	}
	sess.Closed(err)
	if tb.bus.Stats().Subscribers != 0 {
		t.Errorf("subscriber left after the close")
	}
	// Logged once, at error level, with the stack down to the panic.
	var line struct{ Level, Msg, Panic, Stack string }
	if err := json.Unmarshal(logged.Bytes(), &line); err != nil {
		t.Fatalf("log %q: want one JSON line: %v", logged.String(), err)
	}
	if line.Level != "ERROR" || line.Msg != "session panic" || !strings.Contains(line.Stack, "(*fakeConn).Notify") {
		t.Errorf("logged %+v, want an error \"session panic\" whose stack reaches fakeConn.Notify", line)
	}
}

// TestTCPPanicOutsideARequest: a panic while no request is served (here,
// delivering notifications) owes no one a 5.00: the peer gets the Abort
// alone.
func TestTCPPanicOutsideARequest(t *testing.T) {
	tb := newTestbed(t, Config{})
	tb.publish("x", "0") // a topic with no value would not be observed
	c := &fakeConn{}
	sess, _ := tb.h.Open(c)
	observe := message.Message{Code: codes.GET, Token: []byte("o"), Options: message.Options{
		{ID: message.Observe}, {ID: message.URIPath, Value: []byte("t")}, {ID: message.URIPath, Value: []byte("x")},
	}}
	if _, err := sess.Data(append(tcpFrame(t, message.Message{Code: codes.CSM}), tcpFrame(t, observe)...)); err != nil {
		t.Fatal(err)
	}
	c.take(t)
	if err := tb.bus.Publish("x", []byte("1"), "test"); err != nil {
		t.Fatal(err)
	}
	c.panicOnBuffered = true
	err := sess.(protocols.Notified).Notified()
	if !errors.Is(err, ErrPanic) {
		t.Fatalf("Notified = %v, want ErrPanic", err)
	}
	if ms := c.take(t); len(ms) != 1 || ms[0].Code != codes.Abort || string(ms[0].Payload) != "internal error" {
		t.Fatalf("peer got %v, want one Abort with a diagnostic", ms)
	}
	sess.Closed(err)
}

// TestTCPPanicWhileAnswering: when telling the peer panics too (here the
// connection's Write, which the answer needs as well), that second panic
// is recovered, nothing is sent, and the close reason is still ErrPanic.
func TestTCPPanicWhileAnswering(t *testing.T) {
	tb := newTestbed(t, Config{})
	c := &fakeConn{}
	sess, _ := tb.h.Open(c)
	c.take(t)
	c.panicOnWrite = true
	get := message.Message{Code: codes.GET, Token: []byte("g"), Options: message.Options{{ID: message.URIPath, Value: []byte("t")}, {ID: message.URIPath, Value: []byte("x")}}}
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("the second panic escaped: %v", r)
			}
		}()
		_, err = sess.Data(append(tcpFrame(t, message.Message{Code: codes.CSM}), tcpFrame(t, get)...))
	}()
	if !errors.Is(err, ErrPanic) {
		t.Fatalf("Data = %v, want ErrPanic", err)
	}
	if len(c.out) != 0 {
		t.Fatalf("peer got % x, want nothing", c.out)
	}
	sess.Closed(err)
}
