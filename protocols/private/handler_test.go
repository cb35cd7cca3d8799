package private

import (
	"bytes"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// fakeConn captures writes like the gateway's conn: what the socket
// takes goes to out (the peer), the rest waits in pending (Buffered). The
// socket takes everything unless stalled; a write while output is pending
// that would pass highWater (> 0) is refused with ErrBackpressure.
type fakeConn struct {
	id        uint64
	out       bytes.Buffer // what the peer received
	pending   []byte       // what the socket has not taken yet
	stalled   bool         // the peer stopped reading...
	room      int          // ...after this many more bytes
	writes    int
	shared    int // writes through WriteShared
	highWater int
	closed    bool
	notifies  atomic.Int32
	timer     time.Duration // last SetTimer
	dropped   int           // sum of CountDropped
}

func (c *fakeConn) ID() uint64               { return c.id }
func (c *fakeConn) Peer() netip.AddrPort     { return netip.MustParseAddrPort("127.0.0.1:9") }
func (c *fakeConn) Reason() protocols.Reason { return protocols.ReasonNone }
func (c *fakeConn) Buffered() int            { return len(c.pending) }
func (c *fakeConn) Close(error)              { c.closed = true }
func (c *fakeConn) Notify()                  { c.notifies.Add(1) }
func (c *fakeConn) CountDropped(n int)       { c.dropped += n }
func (c *fakeConn) SetTimer(d time.Duration) { c.timer = d }
func (c *fakeConn) Write(p []byte) error {
	if c.closed {
		return protocols.ErrClosed
	}
	if len(c.pending) > 0 {
		if c.highWater > 0 && len(c.pending)+len(p) > c.highWater {
			return protocols.ErrBackpressure
		}
		c.writes++
		c.pending = append(c.pending, p...)
		return nil
	}
	c.writes++
	take := len(p)
	if c.stalled {
		take = min(take, c.room)
		c.room -= take
	}
	c.out.Write(p[:take])
	c.pending = append(c.pending, p[take:]...)
	return nil
}

// WriteShared is the gateway's protocols.SharedWriter, which sessions
// use for batches of shared frames; the fake keeps copies.
func (c *fakeConn) WriteShared(p []byte, _ [][]byte) error {
	c.shared++
	return c.Write(p)
}

// stall makes the socket take room more bytes and then nothing.
func (c *fakeConn) stall(room int) { c.stalled, c.room = true, room }

// resume has the peer read again: the socket takes what is pending.
func (c *fakeConn) resume() {
	c.stalled = false
	c.out.Write(c.pending)
	c.pending = nil
}

// frames parses and consumes everything written so far.
func (c *fakeConn) frames(t *testing.T) []Frame {
	t.Helper()
	in := bytes.Clone(c.out.Bytes())
	c.out.Reset()
	var fs []Frame
	for len(in) > 0 {
		f, n, err := ParseFrame(in, MaxFrameCap)
		if err != nil || n == 0 {
			t.Fatalf("server wrote a bad frame: n=%d err=%v rest %x", n, err, in)
		}
		fs = append(fs, f)
		in = in[n:]
	}
	return fs
}

type testSession struct {
	t    *testing.T
	conn *fakeConn
	sess protocols.Session
}

func newBus(o bus.Options) *bus.Bus { return bus.New(o) }

func openSession(t *testing.T, h *Handler) *testSession {
	t.Helper()
	c := &fakeConn{id: 1}
	s, err := h.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testSession{t: t, conn: c, sess: s}
	t.Cleanup(func() { s.Closed(protocols.ErrShutdown) })
	return ts
}

// feed gives the session in and requires it to consume all of it.
func (ts *testSession) feed(in ...[]byte) error {
	ts.t.Helper()
	all := bytes.Join(in, nil)
	n, err := ts.sess.Data(all)
	if err == nil && n != len(all) {
		ts.t.Fatalf("consumed %d of %d", n, len(all))
	}
	return err
}

// hello opens the session properly and checks the ACK.
func (ts *testSession) hello() {
	ts.t.Helper()
	if err := ts.feed(helloFrame("dev")); err != nil {
		ts.t.Fatal(err)
	}
	ts.expectAck(0, CodeOK)
}

func (ts *testSession) expectAck(id uint32, status Code) {
	ts.t.Helper()
	fs := ts.conn.frames(ts.t)
	if len(fs) != 1 || fs[0].Type != TypeAck {
		ts.t.Fatalf("want one ACK, got %v", types(fs))
	}
	if a, _ := DecodeAck(fs[0].Payload); a.MsgID != id || a.Status != status {
		ts.t.Fatalf("ACK %+v, want id %d status %d", a, id, status)
	}
}

func (ts *testSession) expectError(code Code) {
	ts.t.Helper()
	fs := ts.conn.frames(ts.t)
	if len(fs) != 1 || fs[0].Type != TypeError {
		ts.t.Fatalf("want one ERROR, got %v", types(fs))
	}
	if e, _ := DecodeError(fs[0].Payload); e.Code != code {
		ts.t.Fatalf("ERROR %d %q, want %d", e.Code, e.Text, code)
	}
}

// deliveries runs Notified and decodes what it wrote.
func (ts *testSession) deliveries() ([]Pub, error) {
	ts.t.Helper()
	err := ts.sess.(protocols.Notified).Notified()
	var ps []Pub
	for _, f := range ts.conn.frames(ts.t) {
		if f.Type != TypePub {
			continue
		}
		p, derr := DecodePub(f.Payload)
		if derr != nil {
			ts.t.Fatal(derr)
		}
		ps = append(ps, p)
	}
	return ps, err
}

func types(fs []Frame) []string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Type.String())
	}
	return s
}

func helloFrame(id string) []byte {
	return must(AppendHello(nil, Hello{DeviceID: []byte(id), Keepalive: 30}))
}

func pubFrame(id uint32, topic, data string) []byte {
	return must(AppendPub(nil, Pub{MsgID: id, Topic: []byte(topic), Data: []byte(data)}))
}

func subFrame(typ Type, id uint32, filter string) []byte {
	return must(appendFilter(nil, typ, Sub{MsgID: id, Filter: []byte(filter)}))
}

func pingFrame(tok string) []byte { return AppendFrame(nil, TypePing, []byte(tok)) }

func TestSessionHello(t *testing.T) {
	h := New(config.Private{}, newBus(bus.Options{}), nil)
	ts := openSession(t, h)
	ts.hello()
	if err := ts.feed(pingFrame("ab")); err != nil {
		t.Fatal(err)
	}
	fs := ts.conn.frames(t)
	if len(fs) != 1 || fs[0].Type != TypePong || string(fs[0].Payload) != "ab" {
		t.Fatalf("PING answered with %v", types(fs))
	}
	if err := ts.feed(AppendFrame(nil, TypePong, nil)); err != nil || ts.conn.out.Len() != 0 {
		t.Fatalf("PONG: err %v, wrote %d bytes", err, ts.conn.out.Len())
	}
}

// TestSessionFatal covers every input that ends the connection.
func TestSessionFatal(t *testing.T) {
	oversize := must(AppendPub(nil, Pub{Topic: []byte("t"), Data: make([]byte, 200)}))
	cases := []struct {
		name      string
		hello     bool
		in        []byte
		code      Code
		malformed bool
		want      error
	}{
		{"pub before hello", false, pubFrame(0, "a", "x"), CodeNotHelloFirst, true, CodeNotHelloFirst},
		{"ping before hello", false, pingFrame(""), CodeNotHelloFirst, true, CodeNotHelloFirst},
		{"garbage first", false, []byte("GET / HTTP/1.1\r\n"), CodeMalformed, true, ErrBadMagic},
		{"bad hello id", false, AppendFrame(nil, TypeHello, []byte{0, 0, 0, 0, 0}), CodeMalformed, true, ErrMalformed},
		{"hello twice", true, helloFrame("again"), CodeHelloTwice, true, CodeHelloTwice},
		{"bad magic", true, []byte{0xE3, 0x00}, CodeMalformed, true, ErrBadMagic},
		{"bad version", true, []byte{Magic0, Magic1, 7}, CodeBadVersion, true, ErrBadVersion},
		{"unknown type", true, []byte{Magic0, Magic1, Version, 99}, CodeUnknownType, true, ErrUnknownType},
		{"oversize header", true, oversize[:8], CodeFrameTooLarge, true, ErrFrameTooLarge},
		{"bad crc", true, frameWith(TypePing, nil, func(f []byte) { f[8] ^= 1 }), CodeBadCRC, true, ErrBadCRC},
		{"bad pub layout", true, AppendFrame(nil, TypePub, []byte{0, 0}), CodeMalformed, true, ErrMalformed},
		{"bad sub layout", true, AppendFrame(nil, TypeSub, []byte{0, 0, 0, 1, 0, 5}), CodeMalformed, true, ErrMalformed},
		{"long ping", true, pingFrame("123456789"), CodeMalformed, true, ErrMalformed},
		{"client ack", true, AppendAck(nil, Ack{MsgID: 1}), CodeUnexpectedType, true, CodeUnexpectedType},
		{"client dropped", true, AppendDropped(nil, 1), CodeUnexpectedType, true, CodeUnexpectedType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := New(config.Private{MaxFrame: 100}, newBus(bus.Options{}), nil)
			ts := openSession(t, h)
			if tc.hello {
				ts.hello()
			}
			err := ts.feed(tc.in)
			if !errors.Is(err, tc.want) || errors.Is(err, protocols.ErrMalformed) != tc.malformed {
				t.Fatalf("err = %v, want %v (malformed %v)", err, tc.want, tc.malformed)
			}
			ts.expectError(tc.code)
			if h.Stats().Violations != 1 {
				t.Fatalf("violations %d", h.Stats().Violations)
			}
		})
	}
}

func TestSessionPeerError(t *testing.T) {
	ts := openSession(t, New(config.Private{}, newBus(bus.Options{}), nil))
	ts.hello()
	err := ts.feed(AppendError(nil, CodeInternal, "client confused"))
	if !errors.Is(err, ErrPeerError) || errors.Is(err, protocols.ErrMalformed) || ts.conn.out.Len() != 0 {
		t.Fatalf("err %v, wrote %d bytes", err, ts.conn.out.Len())
	}
}

// TestSessionRejects covers every request failure that keeps the
// connection, answered by ACK status (msg id set) or ERROR (msg id 0).
func TestSessionRejects(t *testing.T) {
	long := strings.Repeat("x", 40)
	cases := []struct {
		name  string
		setup [][]byte
		req   func(id uint32) []byte
		code  Code
	}{
		{"topic too long", nil, func(id uint32) []byte { return pubFrame(id, long, "") }, CodeTopicTooLong},
		{"filter too long", nil, func(id uint32) []byte { return subFrame(TypeSub, id, long) }, CodeTopicTooLong},
		{"unsub filter too long", nil, func(id uint32) []byte { return subFrame(TypeUnsub, id, long) }, CodeTopicTooLong},
		{"wildcard topic", nil, func(id uint32) []byte { return pubFrame(id, "a/+", "") }, CodeBadTopic},
		{"empty topic", nil, func(id uint32) []byte { return pubFrame(id, "", "") }, CodeBadTopic},
		{"bad filter", nil, func(id uint32) []byte { return subFrame(TypeSub, id, "a/#/b") }, CodeBadFilter},
		{"bad unsub filter", nil, func(id uint32) []byte { return subFrame(TypeUnsub, id, "a+") }, CodeBadFilter},
		{"bad unsub filter subscribed", [][]byte{subFrame(TypeSub, 0, "a")},
			func(id uint32) []byte { return subFrame(TypeUnsub, id, "#/a") }, CodeBadFilter},
		{"too many subs", [][]byte{subFrame(TypeSub, 0, "a"), subFrame(TypeSub, 0, "b")},
			func(id uint32) []byte { return subFrame(TypeSub, id, "c") }, CodeTooManySubs},
		{"payload too large", nil, func(id uint32) []byte { return pubFrame(id, "t", strings.Repeat("p", 51)) }, CodePayloadTooLarge},
	}
	for _, tc := range cases {
		for _, id := range []uint32{0, 77} {
			t.Run(tc.name, func(t *testing.T) {
				h := New(config.Private{MaxTopic: 32, MaxSubs: 2}, newBus(bus.Options{MaxPayload: 50}), nil)
				ts := openSession(t, h)
				ts.hello()
				if err := ts.feed(tc.setup...); err != nil {
					t.Fatal(err)
				}
				if err := ts.feed(tc.req(id)); err != nil {
					t.Fatalf("recoverable failure closed the session: %v", err)
				}
				if id != 0 {
					ts.expectAck(id, tc.code)
				} else {
					ts.expectError(tc.code)
				}
				if err := ts.feed(pingFrame("")); err != nil || len(ts.conn.frames(t)) != 1 {
					t.Fatalf("session unusable after reject: %v", err)
				}
			})
		}
	}
}

func TestSessionBusy(t *testing.T) {
	b := newBus(bus.Options{MaxSubscribers: 1})
	if _, err := b.NewSubscriber(nil); err != nil {
		t.Fatal(err)
	}
	ts := openSession(t, New(config.Private{}, b, nil))
	ts.hello()
	if err := ts.feed(subFrame(TypeSub, 3, "a")); err != nil {
		t.Fatal(err)
	}
	ts.expectAck(3, CodeBusy)
}

func TestSessionPubSub(t *testing.T) {
	b := newBus(bus.Options{Now: func() int64 { return 1234 }})
	h := New(config.Private{}, b, nil)
	sub, pub := openSession(t, h), openSession(t, h)
	sub.hello()
	pub.hello()

	// A retained value first: it must reach the new subscription flagged.
	if err := pub.feed(pubFrame(0, "s/old", "r")); err != nil || pub.conn.out.Len() != 0 {
		t.Fatalf("unacked PUB: err %v, wrote %d", err, pub.conn.out.Len())
	}
	if err := sub.feed(subFrame(TypeSub, 5, "s/+"), subFrame(TypeSub, 6, "s/#")); err != nil {
		t.Fatal(err)
	}
	fs := sub.conn.frames(t)
	if len(fs) != 2 || fs[0].Type != TypeAck || fs[1].Type != TypeAck {
		t.Fatalf("SUB answers %v", types(fs))
	}
	if err := pub.feed(pubFrame(9, "s/new", "live")); err != nil {
		t.Fatal(err)
	}
	pub.expectAck(9, CodeOK)
	if sub.conn.notifies.Load() == 0 {
		t.Fatal("subscriber's conn was not notified")
	}
	got, err := sub.deliveries()
	if err != nil || len(got) != 3 {
		t.Fatalf("deliveries %+v err %v", got, err)
	}
	// Live messages first: retained values are read from the cache as the
	// subscriber drains, after what is queued (one replay per filter).
	want := []struct {
		topic, data string
		flags       uint8
	}{{"s/new", "live", 0}, {"s/old", "r", PubRetained}, {"s/old", "r", PubRetained}}
	for i, w := range want {
		p := got[i]
		if string(p.Topic) != w.topic || string(p.Data) != w.data || p.Flags != w.flags ||
			p.MsgID != 0 || p.TS != 1234 || string(p.Src) != Source {
			t.Fatalf("delivery %d: %+v", i, p)
		}
	}

	// Unsubscribing both filters stops deliveries; unknown filters are fine.
	if err := sub.feed(subFrame(TypeUnsub, 0, "s/+"), subFrame(TypeUnsub, 0, "s/#"), subFrame(TypeUnsub, 1, "zz")); err != nil {
		t.Fatal(err)
	}
	sub.expectAck(1, CodeOK)
	if err := pub.feed(pubFrame(0, "s/new", "gone")); err != nil {
		t.Fatal(err)
	}
	if got, err := sub.deliveries(); err != nil || len(got) != 0 {
		t.Fatalf("after UNSUB: %+v %v", got, err)
	}
	if st := h.Stats(); st.Published != 3 || st.Delivered != 3 || st.Sessions != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSessionPipelinedAndPartial(t *testing.T) {
	h := New(config.Private{}, newBus(bus.Options{}), nil)
	ts := openSession(t, h)
	all := bytes.Join([][]byte{helloFrame("d"), subFrame(TypeSub, 1, "a/#"), pubFrame(2, "a/b", "x"), pingFrame("p")}, nil)

	// Byte by byte, the way a trickling peer sends: nothing is consumed
	// until a frame is whole.
	var pending []byte
	for _, c := range all {
		pending = append(pending, c)
		n, err := ts.sess.Data(pending)
		if err != nil {
			t.Fatal(err)
		}
		pending = pending[n:]
	}
	if len(pending) != 0 {
		t.Fatalf("%d bytes never consumed", len(pending))
	}
	if got := types(ts.conn.frames(t)); strings.Join(got, " ") != "ACK ACK ACK PONG" {
		t.Fatalf("answers %v", got)
	}

	// All at once: one Write for all the answers.
	ts2 := openSession(t, h)
	ts2.conn.writes = 0
	if err := ts2.feed(all); err != nil {
		t.Fatal(err)
	}
	if ts2.conn.writes != 1 || len(ts2.conn.frames(t)) != 4 {
		t.Fatalf("%d writes", ts2.conn.writes)
	}
}

// TestSessionBackpressure: deliveries to a peer that stopped reading wait
// in the bus (no slow-consumer close) and resume when the socket drains;
// answers to requests that would pass the high-water mark end the
// session with SLOW_CONSUMER.
func TestSessionBackpressure(t *testing.T) {
	b := newBus(bus.Options{})
	h := New(config.Private{}, b, nil)
	ts := openSession(t, h)
	ts.hello()
	if err := ts.feed(subFrame(TypeSub, 0, "bp/#")); err != nil {
		t.Fatal(err)
	}
	ts.conn.stall(1000) // the peer stops reading
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if err := b.Publish("bp/x", []byte(strconv.Itoa(i)), "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(0, 50)
	if err := ts.sess.(protocols.Notified).Notified(); err != nil || ts.conn.Buffered() == 0 {
		t.Fatalf("err %v, %d bytes pending", err, ts.conn.Buffered())
	}
	writes := ts.conn.writes
	publish(50, 100)
	if err := ts.sess.(protocols.Notified).Notified(); err != nil || ts.conn.writes != writes {
		t.Fatalf("wrote to a full socket: err %v, %d writes", err, ts.conn.writes-writes)
	}
	ts.conn.resume()
	if err := ts.sess.(protocols.Writable).Writable(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range ts.conn.frames(t) {
		p, _ := DecodePub(f.Payload)
		got = append(got, string(p.Data))
	}
	if len(got) != 100 || got[0] != "0" || got[99] != "99" || h.Stats().SlowConsumers != 0 {
		t.Fatalf("got %d deliveries (%v ... ), stats %+v", len(got), got[:min(3, len(got))], h.Stats())
	}

	// Answers to requests are not held back: past the mark they end it.
	ts2 := openSession(t, h)
	ts2.hello()
	ts2.conn.stall(0)
	ts2.conn.highWater = 30
	if err := ts2.feed(pingFrame("12345678")); err != nil {
		t.Fatal(err)
	}
	if err := ts2.feed(pingFrame("12345678")); !errors.Is(err, CodeSlowConsumer) {
		t.Fatalf("err %v", err)
	}
}

func TestSessionBusDisconnect(t *testing.T) {
	b := newBus(bus.Options{Queue: 256, Drop: bus.Disconnect})
	h := New(config.Private{Queue: 4}, b, nil) // private.queue sizes the subscriber
	ts := openSession(t, h)
	ts.hello()
	if err := ts.feed(subFrame(TypeSub, 0, "q/#")); err != nil {
		t.Fatal(err)
	}
	for range 10 { // more than the queue before the worker runs Notified
		if err := b.Publish("q/x", []byte("v"), "test"); err != nil {
			t.Fatal(err)
		}
	}
	err := ts.sess.(protocols.Notified).Notified()
	if !errors.Is(err, CodeSlowConsumer) {
		t.Fatalf("err %v", err)
	}
	ts.expectError(CodeSlowConsumer)

	// A later SUB on the cut-off subscriber is fatal too.
	ts2 := openSession(t, h)
	ts2.hello()
	if err := ts2.feed(subFrame(TypeSub, 0, "q/#")); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		_ = b.Publish("q/x", []byte("v"), "test")
	}
	if err := ts2.feed(subFrame(TypeSub, 0, "other")); !errors.Is(err, CodeSlowConsumer) {
		t.Fatalf("SUB after cut: %v", err)
	}
}

func TestSessionClosedReleases(t *testing.T) {
	b := newBus(bus.Options{})
	h := New(config.Private{}, b, nil)
	c := &fakeConn{}
	s, _ := h.Open(c)
	if _, err := s.Data(append(helloFrame("d"), subFrame(TypeSub, 0, "x")...)); err != nil {
		t.Fatal(err)
	}
	if b.Stats().Subscribers != 1 {
		t.Fatalf("subscribers %d", b.Stats().Subscribers)
	}
	s.Closed(protocols.ErrPeerClosed)
	if b.Stats().Subscribers != 0 {
		t.Fatalf("subscriber not released: %d", b.Stats().Subscribers)
	}
	if err := s.(protocols.Notified).Notified(); err != nil {
		t.Fatalf("Notified after Closed: %v", err)
	}
}

func TestConfigDefaults(t *testing.T) {
	got := New(config.Private{MaxTopic: 1 << 20, MaxFrame: -1}, newBus(bus.Options{}), nil).Config()
	want := config.Private{MaxFrame: DefaultMaxFrame, MaxTopic: MaxTopicCap, MaxSubs: DefaultMaxSubs,
		Queue: DefaultQueue, HelloWithin: DefaultHelloWithin}
	if got != want {
		t.Fatalf("got %+v want %+v", got, want)
	}
}

// TestDataAllocs pins the cost of an unacknowledged PUB: the topic string
// and the bus's payload copy, nothing of ours per frame.
func TestDataAllocs(t *testing.T) {
	h := New(config.Private{}, newBus(bus.Options{}), nil)
	s, _ := h.Open(&fakeConn{})
	if _, err := s.Data(helloFrame("d")); err != nil {
		t.Fatal(err)
	}
	frame := pubFrame(0, "plant/1/temp", "21.5")
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.Data(frame); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Fatalf("%v allocs per PUB, want <= 2 (topic string, bus payload copy)", allocs)
	}
}

func BenchmarkDataPub(b *testing.B) {
	for _, ack := range []uint32{0, 1} {
		name := map[uint32]string{0: "noack", 1: "ack"}[ack]
		b.Run(name, func(b *testing.B) {
			h := New(config.Private{}, newBus(bus.Options{}), nil)
			c := &fakeConn{}
			s, _ := h.Open(c)
			if _, err := s.Data(helloFrame("d")); err != nil {
				b.Fatal(err)
			}
			frame := pubFrame(ack, "plant/1/temp", "21.5")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Data(frame); err != nil {
					b.Fatal(err)
				}
				c.out.Reset()
			}
		})
	}
}

func BenchmarkNotified(b *testing.B) {
	bb := newBus(bus.Options{})
	h := New(config.Private{}, bb, nil)
	c := &fakeConn{}
	s, _ := h.Open(c)
	if _, err := s.Data(append(helloFrame("d"), subFrame(TypeSub, 0, "plant/#")...)); err != nil {
		b.Fatal(err)
	}
	payload := []byte("21.5")
	b.ReportAllocs()
	for b.Loop() {
		_ = bb.Publish("plant/1/temp", payload, "modbus")
		if err := s.(protocols.Notified).Notified(); err != nil {
			b.Fatal(err)
		}
		c.out.Reset()
	}
}

// FuzzSession drives a session with frames built from the input (type
// byte, length byte, payload), valid CRCs included, so the fuzzer reaches
// the handler's logic rather than stopping at the checksum; raw selects
// feeding the bytes unframed instead. The session must never panic, never
// over-consume, and only write well-formed frames.
func FuzzSession(f *testing.F) {
	seed := func(frames ...[]byte) []byte {
		var out []byte
		for _, fr := range frames {
			p := fr[HeaderLen:]
			out = append(out, fr[3], byte(len(p)))
			out = append(out, p...)
		}
		return out
	}
	f.Add(seed(helloFrame("d"), subFrame(TypeSub, 1, "a/#"), pubFrame(2, "a/b", "x"), pingFrame("p")), false)
	f.Add(seed(helloFrame("d"), subFrame(TypeUnsub, 0, "a+"), pubFrame(0, "", "")), false)
	f.Add(seed(pubFrame(0, "a", "x")), false)
	f.Add(append(helloFrame("d"), 0xE3, 0x4D, 1, 2, 0xff), true)
	f.Fuzz(func(t *testing.T, in []byte, raw bool) {
		stream := in
		if !raw {
			stream = nil
			for len(in) >= 2 {
				typ, n := Type(in[0]), min(int(in[1]), len(in)-2)
				stream = AppendFrame(stream, typ, in[2:2+n])
				in = in[2+n:]
			}
		}
		b := bus.New(bus.Options{Queue: 4, Drop: bus.Disconnect})
		h := New(config.Private{MaxTopic: 16, MaxSubs: 2, MaxFrame: 200}, b, nil)
		c := &fakeConn{}
		s, _ := h.Open(c)
		n, err := s.Data(stream)
		if n > len(stream) {
			t.Fatalf("consumed %d of %d", n, len(stream))
		}
		if errors.Is(err, ErrPanic) {
			t.Fatal(err)
		}
		if err == nil {
			_ = b.Publish("a/b", []byte("v"), "fuzz")
			if err := s.(protocols.Notified).Notified(); errors.Is(err, ErrPanic) {
				t.Fatal(err)
			}
		}
		s.Closed(err)
		for out := c.out.Bytes(); len(out) > 0; {
			_, m, perr := ParseFrame(out, MaxFrameCap)
			if perr != nil || m == 0 {
				t.Fatalf("wrote a bad frame: %v %x", perr, out)
			}
			out = out[m:]
		}
		if b.Stats().Subscribers != 0 {
			t.Fatal("subscriber leaked")
		}
	})
}

// panickyConn is a fakeConn whose SetTimer panics, as a bug in the
// session's path would.
type panickyConn struct{ *fakeConn }

func (panickyConn) SetTimer(time.Duration) { panic("timer broke") }

// TestPanicIsAnswered: a session that panics closes its connection with
// ErrPanic, and the client is told first, in the protocol's words (an
// ERROR frame, internal error), instead of meeting a bare EOF.
func TestPanicIsAnswered(t *testing.T) {
	h := New(config.Private{}, bus.New(bus.Options{}), nil)
	c := &fakeConn{}
	s, err := h.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	s.(*session).conn = panickyConn{c} // the HELLO's answer sets a timer
	if _, err := s.Data(helloFrame("d")); !errors.Is(err, ErrPanic) {
		t.Fatalf("Data: %v, want ErrPanic", err)
	}
	fs := c.frames(t)
	if len(fs) != 1 || fs[0].Type != TypeError {
		t.Fatalf("client got %v, want one ERROR", types(fs))
	}
	m, err := DecodeError(fs[0].Payload)
	if err != nil || m.Code != CodeInternal {
		t.Fatalf("ERROR %+v (%v), want internal error", m, err)
	}
}

func TestHelloWithin(t *testing.T) {
	h := New(config.Private{HelloWithin: 3 * time.Second}, bus.New(bus.Options{}), nil)
	c := &fakeConn{}
	sess, err := h.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	if c.timer != 3*time.Second {
		t.Fatalf("Open armed %v, want hello_within", c.timer)
	}
	// The timer fires before any HELLO: ERROR, then the close reason.
	err = sess.(protocols.Timed).Timer()
	if !errors.Is(err, ErrHelloTimeout) {
		t.Fatalf("Timer = %v, want ErrHelloTimeout", err)
	}
	if fs := c.frames(t); len(fs) != 1 || fs[0].Type != TypeError {
		t.Fatalf("wrote %v, want one ERROR", fs)
	}

	// A HELLO in time disarms it.
	c2 := &fakeConn{}
	sess2, _ := h.Open(c2)
	hello, _ := AppendHello(nil, Hello{DeviceID: []byte("d")})
	if _, err := sess2.Data(hello); err != nil {
		t.Fatal(err)
	}
	if c2.timer != 0 {
		t.Fatalf("HELLO left the timer at %v", c2.timer)
	}
	if err := sess2.(protocols.Timed).Timer(); err != nil {
		t.Fatalf("Timer after HELLO = %v", err)
	}
}
