package gateway

// The private protocol over the reliable UDP core, through the gateway
// with its default configuration (udp.routes: rudp -> private): UDP
// devices and TCP clients share one bus; deliveries to a UDP device go
// through the bus subscription, DatagramOut.Wake and rudp's
// acknowledgements (Writable); the sessions show in /debug/registry and
// /metrics.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/protocols/rudp"
	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// dialUDPDevice opens a private-protocol session over rudp with g.
func dialUDPDevice(t *testing.T, addr, id string) *private.Client {
	t.Helper()
	return dialUDPDeviceWith(t, addr, id, rudp.Config{})
}

// dialUDPDeviceWith is dialUDPDevice with the device's session configured.
func dialUDPDeviceWith(t *testing.T, addr, id string, cfg rudp.Config) *private.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := private.DialUDP(ctx, addr, id, cfg, private.ClientOptions{})
	if err != nil {
		t.Fatalf("DialUDP %s: %v", id, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// receive reads n deliveries and checks each with check.
func receive(t *testing.T, c *private.Client, n int, check func(i int, d private.Delivery)) {
	t.Helper()
	for i := range n {
		select {
		case d, ok := <-c.Messages():
			if !ok {
				t.Fatalf("delivery %d of %d: client closed: %v", i, n, c.Err())
			}
			check(i, d)
		case <-time.After(20 * time.Second):
			t.Fatalf("delivery %d of %d: none in 20 s", i, n)
		}
	}
}

// TestPrivateOverRUDP: under every policy, a UDP device publishes to a TCP
// subscriber (with an ACK, and on the unreliable channel) and receives
// from a TCP publisher: 200 deliveries of 8 KiB, 1.6 MB in all, more than
// the device's receive window and send queue hold, so deliveries wait for
// acknowledgements (Writable) and resume; every one arrives whole and in
// order. The session shows in /debug/registry and /metrics.
func TestPrivateOverRUDP(t *testing.T) {
	const deliveries, size = 200, 8 << 10
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Dispatch.Policy = policy
			g := startGateway(t, cfg, Options{})
			addr := g.Addr().String()
			ctx := context.Background()
			tcp, err := private.Dial(ctx, addr, "dashboard", private.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer tcp.Close()
			if err := tcp.Subscribe("plant/#"); err != nil {
				t.Fatal(err)
			}
			dev := dialUDPDevice(t, addr, "udp-sensor-1")

			if err := dev.Publish("plant/line1/temp", []byte("21.5"), true); err != nil {
				t.Fatalf("publish over rudp: %v", err)
			}
			receive(t, tcp, 1, func(_ int, d private.Delivery) {
				if d.Topic != "plant/line1/temp" || string(d.Data) != "21.5" || d.Src != "private" {
					t.Fatalf("TCP subscriber got %+v", d)
				}
			})
			if err := dev.PublishUnreliable("plant/line1/rpm", []byte("1500")); err != nil {
				t.Fatal(err)
			}
			receive(t, tcp, 1, func(_ int, d private.Delivery) {
				if d.Topic != "plant/line1/rpm" || string(d.Data) != "1500" {
					t.Fatalf("TCP subscriber got %+v after the unreliable publish", d)
				}
			})

			if err := dev.Subscribe("cmd/udp-sensor-1/#"); err != nil {
				t.Fatal(err)
			}
			payload := func(i int) []byte {
				return append([]byte(fmt.Sprintf("%05d", i)), bytes.Repeat([]byte{byte(i)}, size-5)...)
			}
			go func() {
				for i := range deliveries {
					if err := tcp.Publish("cmd/udp-sensor-1/set", payload(i), true); err != nil {
						t.Errorf("TCP publish %d: %v", i, err)
						return
					}
				}
			}()
			receive(t, dev, deliveries, func(i int, d private.Delivery) {
				if d.Topic != "cmd/udp-sensor-1/set" || !bytes.Equal(d.Data, payload(i)) {
					t.Fatalf("delivery %d over rudp: topic %q, %d bytes, starts %q", i, d.Topic, len(d.Data), d.Data[:min(len(d.Data), 5)])
				}
			})
			if n := dev.Dropped(); n != 0 {
				t.Errorf("the device was told %d deliveries were dropped", n)
			}

			var view struct {
				RUDP struct {
					Open     int                `json:"open"`
					Sessions []rudp.SessionView `json:"sessions"`
				} `json:"rudp"`
			}
			if err := json.Unmarshal([]byte(httpGet(t, g, "/debug/registry")), &view); err != nil {
				t.Fatal(err)
			}
			if view.RUDP.Open != 1 || len(view.RUDP.Sessions) != 1 || view.RUDP.Sessions[0].In < 4 || view.RUDP.Sessions[0].Out == 0 {
				t.Errorf("/debug/registry rudp: %+v", view.RUDP)
			}
			m := httpGet(t, g, "/metrics")
			if got := metric(m, "edgemux_rudp_sessions"); got != "1" {
				t.Errorf("edgemux_rudp_sessions = %q, want 1", got)
			}
			if st := g.Snapshot(); st.Connections["private/udp"]["active"] != 1 || st.RUDP["opened"] != 1 {
				t.Errorf("the dashboard's snapshot: connections %v, rudp %v", st.Connections, st.RUDP)
			}
			dev.Close()
			eventually(t, "the session gone", func() bool { return g.streams.Stats().Open == 0 })
		})
	}
}

// startRelay runs a lossy relay toward the gateway's port until the test
// ends, or stop, and returns it with the address devices dial.
func startRelay(t *testing.T, g *Gateway, cfg lossy.Config, rebind time.Duration) (r *lossy.Relay, addr string, stop func()) {
	t.Helper()
	listen, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r = lossy.NewRelay(listen, g.Addr(), cfg, rebind)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	stop = sync.OnceFunc(func() { cancel(); listen.Close(); <-done; t.Log("relay: ", r.Report()) })
	t.Cleanup(stop)
	return r, listen.LocalAddr().String(), stop
}

// TestPrivateOverRUDPThroughLossyRelay: a UDP device behind a relay that
// loses 1, 10 and 30 % of the datagrams each way, reorders and duplicates
// 2 %, jitters, and rebinds the device's source port every 300 ms (a NAT):
// 400 PUBs from the device reach a TCP subscriber and 200 deliveries from
// a TCP publisher reach the device, each exactly once and in order, on
// the device's one session.
//
// The relay rebinds when the device sends after the period, and closes
// the old port: a device that has nothing to send (its ACK, from a new
// port, lost) is found again only when it next sends, its keepalive. So
// the device keeps alive every second, as one behind so restless a NAT
// must: with the default 10 s, a lost keepalive left the last deliveries
// waiting past the 20 s a delivery is given (about one run in a hundred at 30 % loss).
func TestPrivateOverRUDPThroughLossyRelay(t *testing.T) {
	const up, down = 400, 200
	for _, loss := range []float64{0.01, 0.10, 0.30} {
		t.Run(fmt.Sprintf("loss%.0f%%", loss*100), func(t *testing.T) {
			g := startGateway(t, testConfig(t), Options{})
			imp := lossy.Impairment{Loss: loss, Delay: 5 * time.Millisecond, Jitter: 2 * time.Millisecond,
				Reorder: 0.02, ReorderDelay: 10 * time.Millisecond, Duplicate: 0.02}
			relay, addr, _ := startRelay(t, g, lossy.Config{Seed: uint64(loss * 1000), Up: imp, Down: imp}, 300*time.Millisecond)
			ctx := context.Background()
			tcp, err := private.Dial(ctx, g.Addr().String(), "dashboard", private.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer tcp.Close()
			if err := tcp.Subscribe("plant/#"); err != nil {
				t.Fatal(err)
			}
			dev := dialUDPDeviceWith(t, addr, "udp-behind-nat", rudp.Config{KeepAlive: time.Second})
			if err := dev.Subscribe("cmd/#"); err != nil {
				t.Fatal(err)
			}
			go func() {
				for i := range up {
					if err := dev.Publish("plant/nat/seq", []byte(strconv.Itoa(i)), false); err != nil {
						t.Errorf("device publish %d: %v", i, err)
						return
					}
				}
			}()
			go func() {
				for i := range down {
					if err := tcp.Publish("cmd/nat", []byte(strconv.Itoa(i)), true); err != nil {
						t.Errorf("TCP publish %d: %v", i, err)
						return
					}
				}
			}()
			receive(t, tcp, up, func(i int, d private.Delivery) {
				if string(d.Data) != strconv.Itoa(i) {
					t.Fatalf("TCP subscriber: message %d is %q", i, d.Data)
				}
			})
			receive(t, dev, down, func(i int, d private.Delivery) {
				if string(d.Data) != strconv.Itoa(i) {
					t.Fatalf("device: delivery %d is %q", i, d.Data)
				}
			})
			st := relay.Stats()
			if loss >= 0.1 && (st.Up.Lost == 0 || st.Down.Lost == 0 || st.NATDrops+st.Up.Duplicated == 0) {
				t.Errorf("the relay impaired nothing: %+v", st)
			}
			// The device's one stream never broke (it would have
			// failed its reads); a rebinding during the handshake can
			// leave the server a second session, bound to the old
			// address, that idles out.
			t.Logf("sessions opened: %d", g.streams.Stats().Opened)
		})
	}
}

// TestShutdownTellsRUDPDevices: under every policy, Shutdown sends a UDP
// device ERROR GOING_AWAY on its session, ends the session once the device
// has it (CLOSE), and returns; no fd, slot or goroutine is left. A device
// behind a relay that goes dark at the drain never acknowledges the
// goodbye: its session holds the drain until the grace ends, then is cut.
func TestShutdownTellsRUDPDevices(t *testing.T) {
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			fds, goroutines := baseline(t)
			var log syncBuffer
			g, done := runLogged(t, policy, &log)
			dev := dialUDPDevice(t, g.Addr().String(), "udp-drained")
			if err := dev.Subscribe("cmd/#"); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := g.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			if _, open := <-dev.Messages(); open {
				t.Fatal("a delivery after the drain")
			}
			if err := dev.Err(); !errors.Is(err, private.CodeGoingAway) {
				t.Errorf("device: %v, want GOING_AWAY", err)
			}
			dev.Close()
			expectReleased(t, g, fds, goroutines)
		})
		t.Run(policy+"/dark", func(t *testing.T) {
			fds, goroutines := baseline(t)
			var log syncBuffer
			g, done := runLogged(t, policy, &log)
			relay, addr, stopRelay := startRelay(t, g, lossy.Config{Seed: 1}, 0)
			dev := dialUDPDevice(t, addr, "udp-dark")
			if err := dev.Subscribe("cmd/#"); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			relay.Blackout(now, now.Add(time.Hour))
			ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
			defer cancel()
			if err := g.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Shutdown = %v, want the grace's end: the dark session never acknowledged", err)
			}
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			dev.Close()
			stopRelay()
			expectReleased(t, g, fds, goroutines)
		})
	}
}

// TestRUDPSpoofedFloodLeavesNoState: 20,000 INITIALs with valid magic
// from 100 source ports that never answer the RETRY (as spoofed sources
// cannot), and 20,000 DATA packets for guessed session ids: no session is
// made and no memory held; the cookies and the unknown sessions are
// counted. A real device connects meanwhile.
func TestRUDPSpoofedFloodLeavesNoState(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	var socks []*net.UDPConn
	for range 100 {
		socks = append(socks, dgClient(t, g))
	}
	now := time.Now()
	buf := make([]byte, 0, 2048)
	for i := range 20000 {
		c, err := rudp.NewClient(rudp.Config{}, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		initial, ok := c.AppendDatagram(buf[:0], now)
		if !ok {
			t.Fatal("no INITIAL")
		}
		socks[i%len(socks)].Write(initial)
		data := rudp.AppendHeader(buf[:0], rudp.Header{Type: rudp.TypeData, SessionID: uint64(i)*0x9E3779B97F4A7C15 + 1})
		socks[(i+1)%len(socks)].Write(append(data, make([]byte, 32)...))
		if i%1000 == 999 {
			time.Sleep(10 * time.Millisecond) // let the receive buffers drain
		}
	}
	dev := dialUDPDevice(t, g.Addr().String(), "real-device")
	if err := dev.Publish("flood/survivor", []byte("ok"), true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the flood counted", func() bool {
		st := g.rudp.Stats().Endpoints
		return st.Retries+st.RetriesDropped > 10000 && st.UnknownSessions+st.Malformed > 10000
	})
	// The endpoints' counts are published by their workers between
	// batches, so under load they may trail the device's session: wait
	// for it. Opened only grows, so a flood that opened a session fails.
	eventually(t, "the endpoints to hold the device's session", func() bool {
		return g.rudp.Stats().Endpoints.Sessions >= 1
	})
	ss, hs := g.streams.Stats(), g.rudp.Stats()
	if ss.Opened != 1 || ss.Open != 1 || hs.Endpoints.Sessions != 1 {
		t.Errorf("sessions: opened %d, open %d, endpoints hold %d; want the device's one", ss.Opened, ss.Open, hs.Endpoints.Sessions)
	}
	dev.Close()
	eventually(t, "no memory held", func() bool {
		hs := g.rudp.Stats()
		return hs.MemoryInUse == 0 && hs.Endpoints.Sessions == 0 && hs.Endpoints.PendingResponses == 0
	})
}

// TestRUDPBlackoutThroughGateway: a device publishing every 50 ms loses
// its path for 10 s mid-stream (the relay drops everything both ways);
// its session outlives the blackout (death is 30 s of silence) and every
// message published meanwhile arrives once, in order, after it.
func TestRUDPBlackoutThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s blackout: not under -short")
	}
	const total = 300 // 15 s at 50 ms
	g := startGateway(t, testConfig(t), Options{})
	relay, addr, _ := startRelay(t, g, lossy.Config{Seed: 5}, 0)
	tcp, err := private.Dial(context.Background(), g.Addr().String(), "dashboard", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	if err := tcp.Subscribe("plant/#"); err != nil {
		t.Fatal(err)
	}
	dev := dialUDPDevice(t, addr, "udp-tunnel")
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := range total {
			if i == 40 {
				now := time.Now()
				relay.Blackout(now, now.Add(10*time.Second))
			}
			if err := dev.Publish("plant/tunnel/seq", []byte(strconv.Itoa(i)), false); err != nil {
				t.Errorf("publish %d: %v", i, err)
				return
			}
			<-tick.C
		}
	}()
	for i := range total {
		select {
		case d := <-tcp.Messages():
			if string(d.Data) != strconv.Itoa(i) {
				t.Fatalf("message %d is %q", i, d.Data)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("message %d: none in 30 s (session %v)", i, dev.Err())
		}
	}
	if st := relay.Stats(); st.Up.Blackholed == 0 {
		t.Errorf("the blackout dropped nothing: %+v", st)
	}
	if n := g.streams.Stats().Opened; n != 1 {
		t.Errorf("%d sessions opened, want the one that survived", n)
	}
}
