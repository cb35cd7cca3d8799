package gateway

// The read side stops at a short read: one read per request instead of a
// second one that only meets EAGAIN. What must not change is that no input
// is lost: bytes that arrive right after the short read, an EOF that sits
// behind the last data, input many times the socket buffer.

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
)

// countReads counts, for the test's lifetime, the worker reads that
// returned data and those that met EAGAIN. Call it before the gateway
// starts: its cleanup then runs after the gateway's, when no worker reads
// the hook any more.
func countReads(t *testing.T) (data, again *atomic.Int64) {
	data, again = new(atomic.Int64), new(atomic.Int64)
	testHookRead = func(n int, err error) {
		switch {
		case n > 0:
			data.Add(1)
		case errors.Is(err, errAgain):
			again.Add(1)
		}
	}
	t.Cleanup(func() { testHookRead = nil })
	return data, again
}

// TestReadStopsShort: a client in lockstep (PING, wait for PONG, PING...)
// costs one read per request. Reading on to EAGAIN cost two: every request
// but the first would add a read that meets EAGAIN.
func TestReadStopsShort(t *testing.T) {
	const pings = 300
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			cfg := rbConfig(t)
			cfg.Dispatch.Policy = policy
			// Before the gateway starts: its workers read the hook.
			data, again := countReads(t)
			g := startGateway(t, cfg, Options{})
			c, err := rbHelloConn(g.Addr().String(), rbAnySource, "pinger")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			data.Store(0) // the HELLO's
			again.Store(0)
			for i := range pings {
				if err := rbWrite(c, rbPingFrame(uint64(i))); err != nil {
					t.Fatal(err)
				}
				f, err := rbReadFrame(c)
				if err != nil || f.Type != private.TypePong {
					t.Fatalf("ping %d: %v %v", i, f.Type, err)
				}
			}
			// Every PING was read (with data) at least once; an edge
			// that raced a read may add an empty one now and then, but
			// nowhere near one per request.
			if d := data.Load(); d < pings {
				t.Fatalf("%d reads with data for %d pings", d, pings)
			}
			if a := again.Load(); a > pings/10 {
				t.Fatalf("%d reads met EAGAIN for %d pings (data reads %d): the read side does not stop at a short read", a, pings, data.Load())
			}
		})
	}
}

// TestShortReadEOFNotLost: a client that sends its last request and its
// FIN at once. The hang-up edge comes with the data, and no later edge
// reports the EOF behind it, so the worker must read on to it: the client
// gets its ACK, then the gateway's own close. Stopping at the short read
// there would hold the connection until the idle timeout (hours here).
func TestShortReadEOFNotLost(t *testing.T) {
	const clients = 40
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			cfg := rbConfig(t)
			cfg.Dispatch.Policy = policy
			g := startGateway(t, cfg, Options{})
			for i := range clients {
				c, err := rbHelloConn(g.Addr().String(), rbAnySource, "last-word-"+strconv.Itoa(i))
				if err != nil {
					t.Fatal(err)
				}
				if err := rbWrite(c, rbPubFrame(7, "bye/"+strconv.Itoa(i), []byte("last"))); err != nil {
					t.Fatal(err)
				}
				c.(*net.TCPConn).CloseWrite()
				if err := rbExpectAck(c, 7); err != nil {
					t.Fatalf("client %d: %v", i, err)
				}
				c.SetReadDeadline(time.Now().Add(rbIOTimeout))
				if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
					t.Fatalf("client %d: after the ACK got %d bytes, %v; want the gateway's EOF", i, n, err)
				}
				c.Close()
			}
		})
	}
}

// TestShortReadLargeInputWhole: input many times the socket buffer in one
// burst, then FIN, with the window after every short read widened: reads
// fill the buffer, stop short at the burst's ragged edges, and the edges
// raised meanwhile must bring the worker back. Every publish is
// acknowledged, in order, then the gateway closes.
func TestShortReadLargeInputWhole(t *testing.T) {
	testHookReadAgain = func() { time.Sleep(200 * time.Microsecond) }
	t.Cleanup(func() { testHookReadAgain = nil })
	const pubs = 600
	data := bytes.Repeat([]byte{'y'}, 9000)
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			g := startGateway(t, largeOutputConfig(t, policy), Options{})
			c, err := rbHelloConn(g.Addr().String(), rbAnySource, "bulk")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var burst []byte
			for i := range pubs {
				burst = append(burst, rbPubFrame(uint32(i+1), "bulk/"+strconv.Itoa(i%7), data)...)
			}
			sent := make(chan error, 1)
			go func() {
				err := rbWrite(c, burst)
				c.(*net.TCPConn).CloseWrite()
				sent <- err
			}()
			for i := range pubs {
				if err := rbExpectAck(c, uint32(i+1)); err != nil {
					t.Fatalf("after %d of %d ACKs: %v", i, pubs, err)
				}
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(rbIOTimeout))
			if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("after the last ACK got %d bytes, %v; want EOF", n, err)
			}
		})
	}
}
