package coap

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	tcpcoder "github.com/plgd-dev/go-coap/v3/tcp/coder"
	udpcoder "github.com/plgd-dev/go-coap/v3/udp/coder"
)

// fuzzSeeds are requests of the table tests, for both fuzz targets.
func fuzzSeeds(tt testing.TB) [][]byte {
	return [][]byte{
		msg{typ: con, code: codes.PUT, mid: 1, token: "a", path: "/t/x", payload: "1"}.encode(tt),
		msg{typ: con, code: codes.GET, mid: 2, token: "o", path: "/t/x", opts: observeReg(0)}.encode(tt),
		msg{typ: con, code: codes.GET, mid: 3, token: "f", path: "/t/+/x", opts: observeReg(0)}.encode(tt),
		msg{typ: con, code: codes.PUT, mid: 4, path: "/t/b", opts: []message.Option{blockOpt(message.Block1, block{num: 0, more: true, szx: 0})}, payload: "0123456789abcdef"}.encode(tt),
		msg{typ: con, code: codes.GET, mid: 5, path: "/.well-known/core", opts: []message.Option{{ID: message.URIQuery, Value: []byte("rt=edgemux*")}}}.encode(tt),
		{0x70, 0x00, 0x00, 0x02}, // RST
		{0x60, 0x00, 0x00, 0x02}, // ACK
	}
}

// FuzzEndpoint feeds arbitrary datagram sequences from several sources,
// with publishes and clock steps between them, to one Endpoint with small
// limits. Each record is: source (1 byte), action (1 byte), length (1
// byte), datagram. Nothing may panic, every datagram sent must parse,
// and the limits and counts must hold after every step.
func FuzzEndpoint(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(append([]byte{0, 0, byte(len(s))}, s...))
	}
	all := []byte{}
	for i, s := range fuzzSeeds(f) {
		all = append(all, byte(i%3), byte(i), byte(len(s)))
		all = append(all, s...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, in []byte) {
		tb := newTestbed(t, Config{MaxPeers: 4, ResponseCache: 16, Uploads: 2, MaxObservations: 2, BlockSize: 16, MaxBody: 64, ConfirmEvery: 2})
		for len(in) >= 3 {
			src, action, n := in[0], in[1], int(in[2])
			in = in[3:]
			n = min(n, len(in))
			from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1 + src%8}), 5683)
			tb.e.Input(from, in[:n], tb.now)
			in = in[n:]
			switch action % 4 {
			case 1:
				_ = tb.bus.Publish("x", []byte{action}, "fuzz")
				tb.e.Woken(tb.now)
			case 2:
				tb.now = tb.now.Add(time.Duration(action) * time.Second)
				tb.e.Tick(tb.now)
			}
			tb.check()
		}
	})
}

// check asserts the endpoint's invariants and that what it sent parses.
func (tb *testbed) check() {
	t := tb.t
	t.Helper()
	for _, d := range tb.sent {
		m := message.Message{Options: make(message.Options, 0, 32)}
		if _, err := udpcoder.DefaultCoder.Decode(d.b, &m); err != nil {
			t.Fatalf("sent % x: %v", d.b, err)
		}
	}
	tb.sent = tb.sent[:0]
	if n := tb.e.Peers(); n > tb.e.maxPeers {
		t.Fatalf("%d peers over the cap %d", n, tb.e.maxPeers)
	}
	if n := tb.h.srv.uploads.Load(); n < 0 || n > int64(tb.h.Config().Uploads) {
		t.Fatalf("uploads count %d", n)
	}
	observers := 0
	for _, p := range tb.e.peers {
		if len(p.w.obs) > 0 {
			observers++
			if p.idle {
				t.Fatalf("an observer is on the idle list")
			}
		} else if !p.idle {
			t.Fatalf("a peer without observations is off the idle list")
		}
		if len(p.w.obs) > tb.h.Config().MaxObservations {
			t.Fatalf("%d observations", len(p.w.obs))
		}
	}
	if subs := tb.bus.Stats().Subscribers; subs != observers {
		t.Fatalf("%d bus subscribers for %d observers", subs, observers)
	}
}

// FuzzTCPSession feeds an arbitrary byte stream, in two pieces, to a
// CoAP-over-TCP session. It may close the connection but never panic, and
// everything it writes must be whole CoAP-over-TCP messages.
func FuzzTCPSession(f *testing.F) {
	csm := []byte{0x00, 0xe1}
	for _, s := range fuzzSeeds(f) {
		// The same requests as TCP frames: Len/TKL, code, token, options.
		m := message.Message{Options: make(message.Options, 0, 16)}
		if _, err := udpcoder.DefaultCoder.Decode(s, &m); err != nil {
			continue
		}
		buf := make([]byte, 512)
		n, err := tcpcoder.DefaultCoder.Encode(m, buf)
		if err == nil {
			f.Add(append(append([]byte{}, csm...), buf[:n]...), uint8(3))
		}
	}
	f.Add([]byte{0x00, 0xe1, 0x00, 0xe2, 0x00, 0xe4}, uint8(2)) // CSM, Ping, Release
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		b := newTestbed(t, Config{TCPMaxMessage: 2048, BlockSize: 16, MaxBody: 64})
		c := &fakeConn{}
		sess, err := b.h.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		s := sess.(*tcpSession)
		defer s.Closed(nil)
		var pending []byte
		for _, piece := range [][]byte{in[:min(int(cut), len(in))], in[min(int(cut), len(in)):]} {
			pending = append(pending, piece...)
			n, err := s.Data(pending)
			if n < 0 || n > len(pending) {
				t.Fatalf("consumed %d of %d", n, len(pending))
			}
			if errors.Is(err, ErrPanic) {
				t.Fatal(err)
			}
			if err != nil {
				break
			}
			pending = pending[n:]
		}
		for out := c.out; len(out) > 0; {
			var h tcpcoder.MessageHeader
			if _, err := tcpcoder.DefaultCoder.DecodeHeader(out, &h); err != nil || int(h.MessageLength) > len(out) {
				t.Fatalf("written bytes are not whole messages: % x", c.out)
			}
			out = out[h.MessageLength:]
		}
	})
}

// FuzzBlock: any Block option value parses or is refused; what parses
// encodes back to a value that parses to the same block.
func FuzzBlock(f *testing.F) {
	for _, v := range [][]byte{nil, {0x06}, {0x1e}, {0x01, 0x0e}, {0xff, 0xff, 0xf6}, {0x0f}, {1, 2, 3, 4}} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		b, err := parseBlock(v)
		if err != nil {
			return
		}
		if b.size() < 16 || b.size() > 1024 || b.num > maxBlockNum {
			t.Fatalf("%x parsed to %+v", v, b)
		}
		again, err := parseBlock(b.value(nil))
		if err != nil || again != b {
			t.Fatalf("%x: %+v encodes to %x, parsed back %+v, %v", v, b, b.value(nil), again, err)
		}
	})
}
