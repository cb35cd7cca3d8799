package main

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// echoServer answers every datagram with itself and records the sources.
type echoServer struct {
	conn    *net.UDPConn
	mu      sync.Mutex
	got     int
	sources map[netip.AddrPort]bool
}

func startEcho(t *testing.T) *echoServer {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{conn: conn, sources: map[netip.AddrPort]bool{}}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			e.mu.Lock()
			e.got++
			e.sources[from] = true
			e.mu.Unlock()
			conn.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	return e
}

// startRelay runs a relay toward upstream until the test ends.
func startRelay(t *testing.T, upstream netip.AddrPort, cfg lossy.Config, rebind time.Duration) (*lossy.Relay, netip.AddrPort) {
	listen, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := lossy.NewRelay(listen, upstream, cfg, rebind)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); listen.Close(); <-done })
	return r, listen.LocalAddr().(*net.UDPAddr).AddrPort()
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestRelayLosesAndCounts: datagrams through the relay with 30 % loss
// each way: the relay's counts add up and match what each end saw.
func TestRelayLosesAndCounts(t *testing.T) {
	echo := startEcho(t)
	imp := lossy.Impairment{Loss: 0.3, Delay: time.Millisecond}
	r, addr := startRelay(t, echo.conn.LocalAddr().(*net.UDPAddr).AddrPort(), lossy.Config{Seed: 9, Up: imp, Down: imp}, 0)
	client, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	received := make(chan int, 1000)
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := client.Read(buf); err != nil {
				return
			}
			received <- 1
		}
	}()
	stats := r.Stats
	for i := 0; i < 400; i++ {
		// One at a time: a burst on loopback overflows the relay's socket
		// buffer, and those drops are the kernel's, not the relay's.
		client.Write([]byte("0123456789"))
		eventually(t, "the relay to read it", func() bool { return stats().Up.Sent == uint64(i+1) })
	}
	eventually(t, "every datagram accounted for", func() bool {
		st := stats()
		return st.Up.Sent == 400 && st.Up.Lost+st.Up.Delivered == 400 && st.Down.Sent == st.Up.Delivered &&
			st.Down.Lost+st.Down.Delivered == st.Down.Sent && len(received) == int(st.Down.Delivered)
	})
	st := stats()
	echo.mu.Lock()
	got := echo.got
	echo.mu.Unlock()
	if got != int(st.Up.Delivered) || st.Up.Lost < 60 || st.Up.Lost > 180 || st.Up.BytesSent != 4000 {
		t.Fatalf("echo got %d; %+v", got, st)
	}
}

// TestRelayRebinds: with a rebinding period shorter than the gap between
// datagrams, the server sees a new source port each time, and the echoes
// still reach the client.
func TestRelayRebinds(t *testing.T) {
	echo := startEcho(t)
	_, addr := startRelay(t, echo.conn.LocalAddr().(*net.UDPAddr).AddrPort(), lossy.Config{Seed: 1}, time.Nanosecond)
	client, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	buf := make([]byte, 64)
	for i := 0; i < 3; i++ {
		client.Write([]byte("ping"))
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := client.Read(buf); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
	}
	echo.mu.Lock()
	defer echo.mu.Unlock()
	if len(echo.sources) != 3 {
		t.Fatalf("the server saw %d sources over 3 rebindings", len(echo.sources))
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parse([]string{"-loss", "0.1", "-delay", "10ms", "-burst", "0.01,0.3,0,0.9"})
	if err != nil || o.cfg.Up.Burst == nil || o.cfg.Down.Delay != 10*time.Millisecond || o.cfg.Down.Burst.LossBad != 0.9 {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := parse([]string{"-loss", "1.5"}); err == nil {
		t.Fatal("a loss of 1.5 accepted")
	}
	if err := blackout(lossy.NewRelay(nil, netip.AddrPort{}, lossy.Config{}, 0), "30s", time.Now()); err == nil {
		t.Fatal("a blackout without a length accepted")
	}
	if err := blackout(lossy.NewRelay(nil, netip.AddrPort{}, lossy.Config{}, 0), "30s+10s", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := loopbackOnly("192.0.2.1:5020"); err == nil {
		t.Fatal("a non-loopback upstream accepted")
	}
}
