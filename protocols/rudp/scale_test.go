package rudp

import (
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// handshake runs a client's handshake against ep directly (no network).
func handshake(t testing.TB, ep *Endpoint, c *Client, addr netip.AddrPort, now time.Time, buf []byte) {
	for i := 0; i < 4 && c.State() == StateHandshake; i++ {
		exchange(ep, c, addr, now, buf)
	}
	if c.State() != StateEstablished {
		t.Fatalf("handshake: %v %v", c.State(), c.Err())
	}
}

// exchange passes everything each side has to the other, once.
func exchange(ep *Endpoint, c *Client, addr netip.AddrPort, now time.Time, buf []byte) {
	for {
		out, ok := c.AppendDatagram(buf[:0], now)
		if !ok {
			break
		}
		ep.Input(addr, out, now)
	}
	for {
		out, to, ok := ep.AppendDatagram(buf[:0], now)
		if !ok {
			break
		}
		if to == addr {
			c.Input(out, now)
		}
	}
}

// TestManySessionsNoLeak opens and closes 100,000 sessions, 1,000 at a
// time, each sending a message; afterwards the endpoint holds nothing:
// no session, timer, handshake entry or buffer, and the heap is back
// where it started.
func TestManySessionsNoLeak(t *testing.T) {
	total := 100_000
	if testing.Short() || raceEnabled {
		total = 10_000
	}
	now := simStart
	ep := readingEndpoint(t, now)
	buf := make([]byte, 0, MaxDatagram)
	base := heapInUse()
	clients := make([]*Client, 1000)
	for wave := 0; wave < total/len(clients); wave++ {
		for i := range clients {
			addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(wave >> 8), byte(wave), byte(i)}), uint16(1000+i))
			c, err := NewClient(Config{}, nil, now)
			if err != nil {
				t.Fatal(err)
			}
			handshake(t, ep, c, addr, now, buf)
			if err := c.Send([]byte("hello from a short-lived session")); err != nil {
				t.Fatal(err)
			}
			exchange(ep, c, addr, now, buf)
			clients[i] = c
		}
		if got := ep.Stats().Sessions; got != len(clients) {
			t.Fatalf("wave %d: %d sessions open, want %d", wave, got, len(clients))
		}
		for i, c := range clients {
			addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(wave >> 8), byte(wave), byte(i)}), uint16(1000+i))
			c.Close()
			exchange(ep, c, addr, now, buf)
		}
		now = now.Add(10 * time.Millisecond)
		ep.Tick(now)
	}
	clients = nil
	st := ep.Stats()
	if st.Sessions != 0 || st.SessionsOpened != uint64(total) || st.MemoryInUse != 0 || ep.wheel.count != 0 || len(ep.handshakes) != 0 || ep.ready != nil {
		t.Fatalf("after %d sessions: %+v, %d timers, %d handshakes", total, st, ep.wheel.count, len(ep.handshakes))
	}
	grown := int64(heapInUse()) - int64(base)
	t.Logf("%d sessions opened and closed; heap %+d bytes", total, grown)
	if grown > 2<<20 {
		t.Fatalf("heap grew by %d bytes over %d sessions", grown, total)
	}
	runtime.KeepAlive(ep)
}

// TestIdleSessionMemory: 100,000 server sessions that each carried a
// message and went idle cost at most 2 KiB each (the figure prints).
func TestIdleSessionMemory(t *testing.T) {
	total := 100_000
	if testing.Short() || raceEnabled {
		total = 10_000
	}
	now := simStart
	ep := readingEndpoint(t, now)
	buf := make([]byte, 0, MaxDatagram)
	pkt := make([]byte, 0, MaxDatagram)
	drain := func() {
		for {
			if _, _, ok := ep.AppendDatagram(buf[:0], now); !ok {
				return
			}
		}
	}
	base := heapInUse()
	hello := helloFrame{maxDatagram: 1200, window: 256, maxMessage: 1 << 16, idleMillis: 30000}
	var cookie [cookieLen]byte
	for i := 0; i < total; i++ {
		addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 4000)
		nonce := uint64(i + 1)
		hello.cookie = ep.cookies.appendCookie(cookie[:0], now.Unix(), nonce, addr)
		pkt = appendCRC(appendHello(AppendHeader(pkt[:0], Header{Type: TypeInitial, SessionID: nonce}), &hello), 0)
		ep.Input(addr, pkt, now)
		drain()
		c := ep.handshakes[handshakeKey{addr, nonce}]
		pkt = appendCRC(appendData(AppendHeader(pkt[:0], Header{Type: TypeData, SessionID: c.ID()}), 0, fragFirst|fragLast, []byte("21.5 C")), 0)
		ep.Input(addr, pkt, now)
		drain()
	}
	now = now.Add(2 * time.Second)
	ep.Tick(now)
	drain()
	if st := ep.Stats(); st.Sessions != total {
		t.Fatalf("%d sessions", st.Sessions)
	}
	per := float64(int64(heapInUse())-int64(base)) / float64(total)
	t.Logf("%d idle sessions: %.0f bytes each", total, per)
	if per > 2048 {
		t.Fatalf("%.0f bytes per idle session, over 2 KiB", per)
	}
	runtime.KeepAlive(ep)
}

// readingEndpoint is an endpoint whose application reads every message
// as it arrives, so only the sessions' own state stays.
func readingEndpoint(t *testing.T, now time.Time) *Endpoint {
	t.Helper()
	ep, err := NewEndpoint(Config{}, EndpointOptions{OnReadable: func(c *Conn) {
		for {
			if _, ok := c.ReadMessage(nil); !ok {
				return
			}
		}
	}}, now)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}
