package gateway

// 100,000 rudp sessions opened and closed through the gateway, 250 at a
// time from 250 sockets: every handshake completes, every session ends,
// and the gateway holds no session, buffer, handshake entry or goroutine
// more than before. A full test run has it; -short (the ARM run under
// emulation) skips it.

import (
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp"
)

// openAndClose runs rounds sessions one after another on one socket: the
// cookie handshake, then CLOSE. It returns how many were established.
func openAndClose(conn *net.UDPConn, rounds int) (established int, err error) {
	buf := make([]byte, 2048)
	out := make([]byte, 0, 2048)
	for range rounds {
		c, err := rudp.NewClient(rudp.Config{}, nil, time.Now())
		if err != nil {
			return established, err
		}
		deadline := time.Now().Add(10 * time.Second)
		for c.State() == rudp.StateHandshake && time.Now().Before(deadline) {
			now := time.Now()
			c.Tick(now)
			for {
				b, ok := c.AppendDatagram(out[:0], now)
				if !ok {
					break
				}
				conn.Write(b)
			}
			wait := 50 * time.Millisecond
			if d := c.NextDeadline(now); !d.IsZero() {
				wait = min(wait, max(time.Until(d), time.Millisecond))
			}
			conn.SetReadDeadline(time.Now().Add(wait))
			if n, err := conn.Read(buf); err == nil {
				c.Input(buf[:n], time.Now())
			}
		}
		if c.State() != rudp.StateEstablished {
			continue
		}
		established++
		c.Close()
		for {
			b, ok := c.AppendDatagram(out[:0], time.Now())
			if !ok {
				break
			}
			conn.Write(b)
		}
	}
	return established, nil
}

func TestRUDPManySessionsNoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 handshakes: not under -short")
	}
	const sockets, rounds = 250, 400
	g := startGateway(t, testConfig(t), Options{})
	goroutines := runtime.NumGoroutine()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range sockets {
		conn := dgClient(t, g)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := openAndClose(conn, rounds)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total != sockets*rounds {
		t.Errorf("%d of %d handshakes completed", total, sockets*rounds)
	}
	eventually(t, "every session ended and its memory released", func() bool {
		hs, ss := g.rudp.Stats(), g.streams.Stats()
		return ss.Open == 0 && hs.MemoryInUse == 0 && hs.Endpoints.Sessions == 0
	})
	if ss := g.streams.Stats(); ss.Opened != uint64(total) {
		t.Errorf("%d sessions opened for %d handshakes", ss.Opened, total)
	}
	if n := len(g.streams.Sessions(10)); n != 0 {
		t.Errorf("/debug/registry still lists %d sessions", n)
	}
	// The clients' goroutines (and the runtime's) end a moment after
	// their sockets close: wait for the count, do not sample it once.
	eventually(t, "goroutines back to the count before", func() bool {
		return runtime.NumGoroutine() <= goroutines
	})
}
