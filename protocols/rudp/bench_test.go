package rudp

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// pair is a client and a server endpoint wired back to back (no network),
// for allocation checks and benchmarks of the hot paths.
type pair struct {
	ep     *Endpoint
	c      *Client
	sc     *Conn
	addr   netip.AddrPort
	now    time.Time
	buf    []byte
	read   []byte
	server int // messages the server application read
}

func newPair(tb testing.TB, cfg Config) *pair {
	tb.Helper()
	p := &pair{addr: netip.MustParseAddrPort("10.1.0.1:4000"), now: simStart, buf: make([]byte, 0, MaxDatagram), read: make([]byte, 0, 4096)}
	srv := cfg
	if len(cfg.PSK) != 0 {
		srv = Config{Keys: Keys{cfg.DeviceID: cfg.PSK}}
	}
	var err error
	p.ep, err = NewEndpoint(srv, EndpointOptions{OnReadable: func(c *Conn) {
		for {
			m, ok := c.ReadMessage(p.read[:0])
			if !ok {
				return
			}
			p.read = m
			p.server++
		}
	}}, p.now)
	if err != nil {
		tb.Fatal(err)
	}
	if p.c, err = NewClient(cfg, nil, p.now); err != nil {
		tb.Fatal(err)
	}
	handshake(tb, p.ep, p.c, p.addr, p.now, p.buf)
	p.sc = p.ep.Session(p.c.ID())
	return p
}

// roundTrip sends one message from the client and carries every packet
// both ways until both sides are quiet, advancing the clock by 1 ms.
func (p *pair) roundTrip(tb testing.TB, msg []byte) {
	if err := p.c.Send(msg); err != nil {
		tb.Fatal(err)
	}
	p.now = p.now.Add(time.Millisecond)
	for i := 0; i < 3; i++ {
		exchange(p.ep, p.c, p.addr, p.now, p.buf)
		p.now = p.now.Add(2 * time.Millisecond)
		p.ep.Tick(p.now)
		p.c.Tick(p.now)
	}
}

// TestSteadyStateDoesNotAllocate: once warm, a message's whole round
// (Send, encode, Input on the server, delivery, the ACK back, Tick) makes
// no allocation, in plain and in sealed mode.
func TestSteadyStateDoesNotAllocate(t *testing.T) {
	for name, cfg := range map[string]Config{
		"plain":  {},
		"sealed": {DeviceID: "dev", PSK: bytes.Repeat([]byte{9}, 32)},
	} {
		p := newPair(t, cfg)
		msg := make([]byte, 64)
		for i := 0; i < 100; i++ {
			p.roundTrip(t, msg)
		}
		before := p.server
		allocs := testing.AllocsPerRun(200, func() { p.roundTrip(t, msg) })
		if p.server-before != 201 {
			t.Fatalf("%s: %d messages delivered in 201 rounds", name, p.server-before)
		}
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per message", name, allocs)
		}
	}
}

// BenchmarkEncode: header, ACK with SACK ranges, DATA frame, CRC.
func BenchmarkEncode(b *testing.B) {
	buf := make([]byte, 0, MaxDatagram)
	payload := make([]byte, 64)
	ack := &ackFrame{cum: 100, window: 256, n: 3, ranges: [MaxSACKRanges]sackRange{{102, 104}, {106, 107}, {110, 120}}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		out := AppendHeader(buf[:0], Header{Type: TypeData, SessionID: 77, Number: uint32(i)})
		out = appendAck(out, ack)
		out = appendData(out, uint32(i), fragFirst|fragLast, payload)
		buf = appendCRC(out, 0)
	}
}

// BenchmarkParse: header and frames of a DATA packet with an ACK and a
// 64-byte fragment.
func BenchmarkParse(b *testing.B) {
	out := AppendHeader(nil, Header{Type: TypeData, SessionID: 77, Number: 5})
	out = appendAck(out, &ackFrame{cum: 100, window: 256, n: 1, ranges: [MaxSACKRanges]sackRange{{102, 104}}})
	out = appendCRC(appendData(out, 9, fragFirst|fragLast, make([]byte, 64)), 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseHeader(out); err != nil {
			b.Fatal(err)
		}
		body, err := checkCRC(out)
		if err != nil || checkFrames(TypeData, body[HeaderLen:]) != nil {
			b.Fatal("bad packet")
		}
	}
}

// BenchmarkSend: Send and AppendDatagram of a 64-byte message on a
// client (the ACKs come back every 32 messages).
func BenchmarkSend(b *testing.B) {
	p := newPair(b, Config{})
	msg := make([]byte, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := p.c.Send(msg); err != nil {
			b.Fatal(err)
		}
		out, ok := p.c.AppendDatagram(p.buf[:0], p.now)
		if ok {
			p.ep.Input(p.addr, out, p.now)
		}
		if i%32 == 31 {
			p.now = p.now.Add(3 * time.Millisecond)
			p.ep.Tick(p.now)
			exchange(p.ep, p.c, p.addr, p.now, p.buf)
		}
	}
}

// BenchmarkInput: the server's Input of a DATA packet carrying a 64-byte
// message, its delivery to the application and the ACK it owes.
func BenchmarkInput(b *testing.B) {
	for _, sealed := range []bool{false, true} {
		name := "plain"
		cfg := Config{}
		if sealed {
			name, cfg = "sealed", Config{DeviceID: "dev", PSK: bytes.Repeat([]byte{9}, 32)}
		}
		b.Run(name, func(b *testing.B) {
			p := newPair(b, cfg)
			msg := make([]byte, 64)
			pkts := make([][]byte, 0, 64)
			start := p.server
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if len(pkts) == 0 {
					b.StopTimer()
					for k := 0; k < 64; k++ {
						p.now = p.now.Add(time.Millisecond)
						p.c.Tick(p.now)
						if err := p.c.Send(msg); err != nil {
							b.Fatal(err)
						}
						out, ok := p.c.AppendDatagram(nil, p.now)
						if !ok {
							b.Fatal("the client sends nothing")
						}
						pkts = append(pkts, out)
					}
					b.StartTimer()
				}
				p.ep.Input(p.addr, pkts[0], p.now)
				pkts = pkts[1:]
				for {
					out, _, ok := p.ep.AppendDatagram(p.buf[:0], p.now)
					if !ok {
						break
					}
					p.c.Input(out, p.now)
				}
			}
			b.StopTimer()
			if p.server-start != b.N {
				b.Fatalf("%d messages delivered of %d", p.server-start, b.N)
			}
		})
	}
}

// BenchmarkTick: an endpoint with 10,000 idle sessions, ticked every
// millisecond of virtual time.
func BenchmarkTick(b *testing.B) {
	now := simStart
	ep, err := NewEndpoint(Config{}, EndpointOptions{}, now)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, MaxDatagram)
	for i := 0; i < 10_000; i++ {
		c, _ := NewClient(Config{}, nil, now)
		handshake(b, ep, c, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), 4000), now, buf)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Millisecond)
		ep.Tick(now)
		for {
			if _, _, ok := ep.AppendDatagram(buf[:0], now); !ok {
				break
			}
		}
	}
}

// BenchmarkKeepalive: the server's cost of one idle session's keepalive
// (Input, the ACK back if it asks for one, the timers), 10,000 and
// 100,000 sessions taking turns, one keepalive each per DefaultKeepAlive
// of virtual time: "ping" a PING (answered), "quiet" a PADDING packet
// (not answered; every other keepalive of an idle client). Multiply by
// the keepalives a second to get the core's share (the socket calls are
// the gateway's, not counted here). At 100,000 sessions the session
// table and the sessions no longer fit in the caches, as on a gateway
// holding an idle fleet: each keepalive meets its session cold.
func BenchmarkKeepalive(b *testing.B) {
	for _, kind := range []struct {
		name  string
		frame byte
	}{{"ping", framePing}, {"quiet", framePadding}} {
		for _, sessions := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%d", kind.name, sessions), func(b *testing.B) { benchKeepalive(b, kind.frame, sessions) })
		}
	}
}

func benchKeepalive(b *testing.B, frame byte, sessions int) {
	now := simStart
	ep, err := NewEndpoint(Config{}, EndpointOptions{}, now)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, MaxDatagram)
	ids := make([]uint64, sessions)
	addrs := make([]netip.AddrPort, sessions)
	for i := range ids {
		addrs[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 4000)
		c, _ := NewClient(Config{}, nil, now)
		handshake(b, ep, c, addrs[i], now, buf)
		ids[i] = c.ID()
	}
	var ping []byte // one buffer for all: the datagram is warm, as a loop's receive slab
	step := DefaultKeepAlive / time.Duration(sessions)
	answers := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % sessions
		pn := uint32(i / sessions)
		ping = appendCRC(append(AppendHeader(ping[:0], Header{Type: TypeData, SessionID: ids[k], Number: pn}), frame), 0)
		now = now.Add(step)
		ep.Input(addrs[k], ping, now)
		ep.Tick(now)
		for {
			if _, _, ok := ep.AppendDatagram(buf[:0], now); !ok {
				break
			}
			answers++
		}
	}
	b.StopTimer()
	if st := ep.Stats(); st.Sessions != sessions {
		b.Fatalf("%d sessions left of %d", st.Sessions, sessions)
	}
	b.ReportMetric(float64(answers)/float64(b.N), "answers/op")
}

// BenchmarkEcho: one 64-byte message to the server and its echo back,
// both ends' protocol work (no sockets), 32 messages per exchange: the
// pure core's share of "echo messages per CPU-second".
func BenchmarkEcho(b *testing.B) {
	p := newPair(b, Config{})
	p.ep.opts.OnReadable = func(c *Conn) {
		for {
			m, ok := c.ReadMessage(p.read[:0])
			if !ok {
				return
			}
			p.read = m
			if err := c.Send(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	msg := make([]byte, 64)
	echoed := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 32 {
		for k := 0; k < 32 && i+k < b.N; k++ {
			if err := p.c.Send(msg); err != nil {
				b.Fatal(err)
			}
		}
		p.now = p.now.Add(time.Millisecond)
		for r := 0; r < 3; r++ {
			exchange(p.ep, p.c, p.addr, p.now, p.buf)
		}
		for {
			if _, ok := p.c.ReadMessage(p.read[:0]); !ok {
				break
			}
			echoed++
		}
	}
	b.StopTimer()
	if echoed != b.N {
		b.Fatalf("%d echoes of %d", echoed, b.N)
	}
}
