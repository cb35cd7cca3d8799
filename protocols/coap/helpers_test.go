package coap

import (
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	udpcoder "github.com/plgd-dev/go-coap/v3/udp/coder"

	"github.com/edgemux/edgemux/route/bus"
)

// testbed is one Endpoint on a bus, with the datagrams it sent and a
// clock the test moves.
type testbed struct {
	t     *testing.T
	h     *Handler
	bus   *bus.Bus
	e     *Endpoint
	now   time.Time
	sent  []datagram
	wakes atomic.Int64
}

type datagram struct {
	to netip.AddrPort
	b  []byte
}

func newTestbed(t *testing.T, cfg Config) *testbed {
	t.Helper()
	tb := &testbed{t: t, bus: bus.New(bus.Options{}), now: time.Unix(1_800_000_000, 0)}
	tb.h = New(cfg, tb.bus, nil)
	tb.e = newEndpoint(tb.h.srv, 1, func(to netip.AddrPort, b []byte) {
		tb.sent = append(tb.sent, datagram{to, append([]byte(nil), b...)})
	}, func() { tb.wakes.Add(1) })
	t.Cleanup(tb.e.Close)
	return tb
}

var (
	peerA = netip.MustParseAddrPort("127.0.0.2:40000")
	peerB = netip.MustParseAddrPort("127.0.0.3:40000")
)

// msg is a test's request or reply, built with go-coap's codec.
type msg struct {
	typ     message.Type
	code    codes.Code
	mid     uint16
	token   string
	path    string // "/t/a/b"; "" for none
	opts    []message.Option
	payload string
}

func (m msg) encode(t testing.TB) []byte {
	t.Helper()
	var opts message.Options
	if m.path != "" {
		for _, seg := range strings.Split(strings.TrimPrefix(m.path, "/"), "/") {
			opts = opts.Add(message.Option{ID: message.URIPath, Value: []byte(seg)})
		}
	}
	for _, o := range m.opts {
		opts = opts.Add(o)
	}
	mm := message.Message{Type: m.typ, Code: m.code, MessageID: int32(m.mid), Options: opts, Payload: []byte(m.payload)}
	if m.token != "" {
		mm.Token = []byte(m.token)
	}
	buf := make([]byte, 4096)
	n, err := udpcoder.DefaultCoder.Encode(mm, buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func uintOpt(id message.OptionID, v uint32) message.Option {
	return message.Option{ID: id, Value: appendUint(nil, v)}
}

func blockOpt(id message.OptionID, b block) message.Option {
	return message.Option{ID: id, Value: b.value(nil)}
}

// in feeds m from peer.
func (tb *testbed) in(from netip.AddrPort, m msg) {
	tb.t.Helper()
	tb.e.Input(from, m.encode(tb.t), tb.now)
}

// out returns and forgets what was sent, decoded.
func (tb *testbed) out() []message.Message {
	tb.t.Helper()
	var ms []message.Message
	for _, d := range tb.sent {
		m := message.Message{Options: make(message.Options, 0, 16)}
		if _, err := udpcoder.DefaultCoder.Decode(d.b, &m); err != nil {
			tb.t.Fatalf("sent datagram % x does not decode: %v", d.b, err)
		}
		ms = append(ms, m)
	}
	tb.sent = nil
	return ms
}

// one returns the one message sent since the last call.
func (tb *testbed) one() message.Message {
	tb.t.Helper()
	ms := tb.out()
	if len(ms) != 1 {
		tb.t.Fatalf("sent %d messages, want 1: %v", len(ms), ms)
	}
	return ms[0]
}

// publish puts a value on the bus from elsewhere and runs the wake.
func (tb *testbed) publish(topic, value string) {
	tb.t.Helper()
	if err := tb.bus.Publish(topic, []byte(value), "test"); err != nil {
		tb.t.Fatal(err)
	}
	tb.e.Woken(tb.now)
}

func observeOf(t *testing.T, m message.Message) uint32 {
	t.Helper()
	v, err := m.Options.GetUint32(message.Observe)
	if err != nil {
		t.Fatalf("%v has no Observe", m.String())
	}
	return v
}

// runTimers moves the clock to the endpoint's next deadlines until one
// sends something or none is left.
func (tb *testbed) runTimers() {
	for range 10 {
		wait := tb.e.Tick(tb.now)
		if wait <= 0 || len(tb.sent) > 0 {
			return
		}
		tb.now = tb.now.Add(wait)
		tb.e.Tick(tb.now)
		if len(tb.sent) > 0 {
			return
		}
	}
}
