package rudp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// FuzzParseHeader: no panic; what parses encodes back to the same bytes.
func FuzzParseHeader(f *testing.F) {
	for _, tc := range headerCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendHeader(nil, h), b[:HeaderLen]) {
			t.Fatalf("%x parses to %+v which encodes differently", b[:HeaderLen], h)
		}
		_ = Route(netip.AddrPort{}, b, 5)
	})
}

// FuzzFrames drives every frame parser through checkFrames and
// parseFrame for each packet type: no panic, and a frame that parses
// re-encodes to the bytes it came from.
func FuzzFrames(f *testing.F) {
	for _, tc := range frameCases() {
		f.Add(byte(tc.typ), tc.b)
	}
	f.Fuzz(func(t *testing.T, typ byte, b []byte) {
		_ = checkFrames(PacketType(typ%5), b)
		var fr frame
		for len(b) > 0 {
			rest, err := parseFrame(b, &fr)
			if err != nil {
				return
			}
			consumed := b[:len(b)-len(rest)]
			if enc := encodeFrame(&fr); enc != nil && !bytes.Equal(enc, consumed) {
				t.Fatalf("frame %#x: %x re-encodes as %x", fr.typ, consumed, enc)
			}
			b = rest
		}
	})
}

// encodeFrame re-encodes a parsed frame (nil for the ones without
// content worth comparing).
func encodeFrame(f *frame) []byte {
	switch f.typ {
	case frameAck:
		return appendAck(nil, &f.ack)
	case frameData:
		return appendData(nil, f.data.seq, f.data.flags, f.data.data)
	case frameDatagram:
		return appendDatagram(nil, f.bytes)
	case frameHello:
		return appendHello(nil, &f.hello)
	case frameAccept:
		return appendAccept(nil, &f.accept)
	case frameRetry:
		return appendRetry(nil, f.bytes)
	case framePathChallenge, framePathResponse:
		return appendPath(nil, f.typ, f.value)
	case frameClose:
		return appendClose(nil, f.close.code, string(f.close.reason))
	}
	return nil
}

// FuzzEndpoint drives a server endpoint, with one established session, by
// an arbitrary sequence of datagrams from a few addresses (the fuzzer's
// bytes, with the session's id and a valid CRC spliced in half of the
// time, so they reach the session's state machine): no panic, the
// endpoint's state and memory stay within their bounds, and the session
// still works afterwards.
func FuzzEndpoint(f *testing.F) {
	f.Add([]byte{0}, uint8(0))
	for _, tc := range frameCases() {
		f.Add(tc.b, uint8(tc.typ))
	}
	f.Add(appendData(appendAck(nil, &ackFrame{cum: 1 << 20, window: 9}), 0, 3, []byte("x")), uint8(TypeData))
	f.Fuzz(func(t *testing.T, frames []byte, mode uint8) {
		cfg := Config{MaxSessions: 4, MemoryBudget: 1 << 20, PendingRetries: 8}
		s := newSim(t, 3, cfg, noImpairment())
		s.onServerMessage = func(c *Conn, msg []byte) {}
		c := s.addClient(cfg)
		s.established()
		id := c.ID()
		addrs := []netip.AddrPort{c.addr, netip.MustParseAddrPort("10.9.9.9:1"), netip.MustParseAddrPort("10.9.9.9:2")}
		r := rand.New(rand.NewPCG(uint64(len(frames)), uint64(mode)))
		for i := 0; len(frames) > 0 && i < 64; i++ {
			n := min(len(frames), 1+r.IntN(200))
			chunk := frames[:n]
			frames = frames[n:]
			typ := PacketType(1 + (int(mode)+i)%4)
			d := AppendHeader(nil, Header{Type: typ, SessionID: id, Number: uint32(i + 1000)})
			if r.IntN(2) == 0 {
				d = AppendHeader(nil, Header{Type: typ, SessionID: r.Uint64(), Number: r.Uint32()})
			}
			d = appendCRC(append(d, chunk...), 0)
			if r.IntN(4) == 0 {
				d = chunk // raw bytes
			}
			s.ep.Input(addrs[r.IntN(len(addrs))], d, s.now)
			s.flush()
			s.step(s.now.Add(time.Millisecond))
		}
		st := s.ep.Stats()
		if st.Sessions > cfg.MaxSessions || st.MemoryInUse > cfg.MemoryBudget || st.PendingResponses > cfg.PendingRetries {
			t.Fatalf("bounds broken: %+v", st)
		}
		if sc := s.ep.Session(id); sc != nil && sc.State() == StateEstablished && c.State() == StateEstablished {
			var got []byte
			s.onServerMessage = func(_ *Conn, msg []byte) { got = msg }
			if err := c.Send([]byte("still alive")); err != nil {
				t.Fatal(err)
			}
			// A forged packet number far ahead (plain mode cannot stop an
			// on-path forger) makes the client's packets look replayed:
			// such a session ends at the idle timeout.
			s.runUntil(s.now.Add(DefaultIdleTimeout+10*time.Second), func() bool { return got != nil || sc.State() != StateEstablished })
			if sc.State() == StateEstablished && string(got) != "still alive" {
				t.Fatalf("session no longer delivers: %q, server %s", got, sc.debugString())
			}
		}
	})
}

// FuzzClient feeds a client, in each state, arbitrary datagrams: no
// panic, and its queues stay within their bounds.
func FuzzClient(f *testing.F) {
	for _, tc := range frameCases() {
		f.Add(tc.b, uint8(tc.typ), false)
	}
	f.Fuzz(func(t *testing.T, frames []byte, typ uint8, established bool) {
		cfg := Config{MemoryBudget: 1 << 20}
		s := newSim(t, 5, cfg, noImpairment())
		c := s.addClient(cfg)
		if established {
			s.established()
		}
		var nonce [8]byte
		binary.BigEndian.PutUint64(nonce[:], c.nonce)
		for _, id := range []uint64{c.ID(), c.nonce, 99} {
			if id == 0 {
				continue
			}
			d := AppendHeader(nil, Header{Type: PacketType(typ%4 + 1), SessionID: id, Number: 1})
			c.Input(appendCRC(append(d, frames...), 0), s.now)
			c.Input(append(d, frames...), s.now)
		}
		s.flush()
		s.runUntil(s.now.Add(time.Second), nil)
		if c.pool.held > cfg.MemoryBudget || c.dgramIn.size > c.cfg.DatagramQueue {
			t.Fatalf("bounds broken: budget %d, datagrams %d", c.pool.held, c.dgramIn.size)
		}
	})
}

// FuzzSealedInitial feeds a sealed-mode endpoint INITIALs whose frames
// are the fuzzer's, with a valid cookie and CRC (so they reach the device
// and AUTH checks): no panic, and no session without a valid AUTH.
func FuzzSealedInitial(f *testing.F) {
	key := bytes.Repeat([]byte{5}, 32)
	hello := &helloFrame{maxDatagram: 1200, window: 256, idleMillis: 30000, deviceID: []byte("dev")}
	f.Add(appendHello(nil, hello), false)
	f.Add(append(append(appendHello(nil, hello), frameAuth), make([]byte, authLen)...), false)
	f.Add(appendHello(nil, hello), true)
	withCookie := *hello
	withCookie.cookie = make([]byte, cookieLen)
	f.Add(appendHello(nil, &withCookie), true) // the seed that makes a session
	f.Fuzz(func(t *testing.T, frames []byte, withAuth bool) {
		ep, err := NewEndpoint(Config{Keys: Keys{"dev": key}}, EndpointOptions{}, simStart)
		if err != nil {
			t.Fatal(err)
		}
		addr := netip.MustParseAddrPort("10.1.0.1:4000")
		var hf frame
		if len(frames) > 0 && frames[0] == frameHello {
			if _, err := parseHello(frames, &hf.hello); err == nil && len(hf.hello.cookie) == cookieLen {
				// Splice a valid cookie over the fuzzer's.
				i := 1 + 2 + 2 + 4 + 4 + 1
				ep.cookies.appendCookie(frames[i:i], simStart.Unix(), 77, addr)
			}
		}
		d := append(AppendHeader(nil, Header{Type: TypeInitial, Sealed: true, SessionID: 77}), frames...)
		if withAuth {
			mac := initialAuth(key, d)
			d = append(append(d, frameAuth), mac[:]...)
		}
		ep.Input(addr, appendCRC(d, 0), simStart)
		if st := ep.Stats(); st.Sessions > 0 && !withAuth {
			t.Fatalf("a session without a valid AUTH: %+v", st)
		}
	})
}
