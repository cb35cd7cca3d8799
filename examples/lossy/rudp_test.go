package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/rudp"
	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// udpOut is a DatagramOut over a real socket.
type udpOut struct{ conn *net.UDPConn }

func (o udpOut) Wake() {}

func (o udpOut) Send(to netip.AddrPort, b []byte) error {
	_, err := o.conn.WriteToUDPAddrPort(b, to)
	return err
}

// collectApp records the messages a server session reads.
type collectApp struct {
	mu      sync.Mutex
	msgs    [][]byte
	session *rudp.Conn
}

func (a *collectApp) Opened(c *rudp.Conn) { a.mu.Lock(); a.session = c; a.mu.Unlock() }
func (a *collectApp) Message(_ *rudp.Conn, m []byte) {
	a.mu.Lock()
	a.msgs = append(a.msgs, append([]byte(nil), m...))
	a.mu.Unlock()
}
func (a *collectApp) Datagram(*rudp.Conn, []byte) {}
func (a *collectApp) Closed(*rudp.Conn, error)    {}
func (a *collectApp) count() int                  { a.mu.Lock(); defer a.mu.Unlock(); return len(a.msgs) }
func (a *collectApp) get(i int) []byte            { a.mu.Lock(); defer a.mu.Unlock(); return a.msgs[i] }

// serveUDP runs one rudp worker on a real socket until the socket closes:
// read with a deadline at the worker's next timer, feed, tick.
func serveUDP(conn *net.UDPConn, w protocols.DatagramWorker) {
	buf := make([]byte, 65536)
	next := time.Duration(0)
	for {
		wait := 100 * time.Millisecond
		if next > 0 {
			wait = min(wait, next)
		}
		conn.SetReadDeadline(time.Now().Add(wait))
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		switch {
		case err == nil:
			from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
			w.Datagrams([]protocols.Datagram{{Peer: from, Data: buf[:n]}}, time.Now())
		case errors.Is(err, os.ErrDeadlineExceeded):
		default:
			return
		}
		next = w.Tick(time.Now())
	}
}

// TestRUDPThroughTheRelay: a rudp client and a rudp worker on real UDP
// sockets, through the relay at 10 % loss each way with jitter,
// reordering and duplication and a port rebinding every 50 ms: every
// message arrives once, in order.
func TestRUDPThroughTheRelay(t *testing.T) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	app := &collectApp{}
	h, err := rudp.NewHandler(rudp.Config{}, app)
	if err != nil {
		t.Fatal(err)
	}
	w := h.Worker(0, 1, udpOut{srv})
	done := make(chan struct{})
	go func() { serveUDP(srv, w); close(done) }()
	stop := sync.OnceFunc(func() { srv.Close(); <-done; w.Close() })
	t.Cleanup(stop)

	imp := lossy.Impairment{Loss: 0.1, Delay: 5 * time.Millisecond, Jitter: 2 * time.Millisecond, Reorder: 0.02, ReorderDelay: 10 * time.Millisecond, Duplicate: 0.02}
	_, relayAddr := startRelay(t, srv.LocalAddr().(*net.UDPAddr).AddrPort(), lossy.Config{Seed: 3, Up: imp, Down: imp}, 50*time.Millisecond)
	client, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(relayAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := rudp.NewClient(rudp.Config{}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const total = 500
	msg := func(i int) []byte {
		return append([]byte(fmt.Sprintf("message %05d ", i)), bytes.Repeat([]byte{byte(i)}, i*7%2500)...)
	}
	buf := make([]byte, 65536)
	sent := 0
	for deadline := time.Now().Add(60 * time.Second); app.count() < total && time.Now().Before(deadline); {
		for sent < total && c.State() != rudp.StateClosed && c.Buffered() < 64<<10 {
			if err := c.Send(msg(sent)); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		for {
			out, ok := c.AppendDatagram(buf[:0], time.Now())
			if !ok {
				break
			}
			client.Write(out)
		}
		wait := 20 * time.Millisecond
		if d := c.NextDeadline(time.Now()); !d.IsZero() {
			wait = min(wait, max(time.Until(d), 0))
		}
		client.SetReadDeadline(time.Now().Add(wait))
		if n, err := client.Read(buf); err == nil {
			c.Input(buf[:n], time.Now())
		}
		c.Tick(time.Now())
	}
	if c.State() != rudp.StateEstablished || app.count() != total {
		t.Fatalf("client %v (%v); %d of %d messages", c.State(), c.Err(), app.count(), total)
	}
	for i := 0; i < total; i++ {
		if !bytes.Equal(app.get(i), msg(i)) {
			t.Fatalf("message %d is not the %d-th sent", i, i)
		}
	}
	stop() // the server's goroutine owns the session until then
	app.mu.Lock()
	migrations := app.session.Stats().Migrations
	app.mu.Unlock()
	if migrations == 0 {
		t.Fatal("the session never moved to a new port")
	}
	st := c.Stats()
	t.Logf("%d migrations; %d messages; client: %d packets, %d retransmits, %d RTOs, srtt %v", migrations, total, st.PacketsSent, st.Retransmits, st.RTOs, c.SRTT())
}
