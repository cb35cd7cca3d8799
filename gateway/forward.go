package gateway

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// forwarder copies forwarded connections to their backends: the peeked
// bytes are still in the socket, so the backend sees the stream intact.
type forwarder struct {
	g      *Gateway
	active atomic.Int64
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

func newForwarder(g *Gateway) *forwarder {
	return &forwarder{g: g, conns: map[net.Conn]struct{}{}}
}

func (f *forwarder) track(c net.Conn, on bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		if f.conns == nil {
			return false // closed
		}
		f.conns[c] = struct{}{}
		return true
	}
	delete(f.conns, c)
	return true
}

func (f *forwarder) forward(d *detached, backend string, dialTimeout time.Duration) {
	if !f.track(d.conn, true) {
		d.conn.Close()
		return
	}
	f.active.Add(1)
	f.g.wg.Add(1)
	go func() {
		defer f.g.wg.Done()
		defer f.active.Add(-1)
		defer f.track(d.conn, false)
		defer d.conn.Close()
		up, err := net.DialTimeout("tcp", backend, dialTimeout)
		if err != nil {
			f.g.metrics.forwardErrors.Inc()
			f.g.log.Warn("forward dial", "backend", backend, "peer", d.peer.String(), "err", err)
			return
		}
		if !f.track(up, true) {
			up.Close()
			return
		}
		defer f.track(up, false)
		defer up.Close()
		f.g.metrics.forwarded.Inc()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipe(up, d.conn)
		}()
		pipe(d.conn, up)
		wg.Wait()
	}()
}

// pipe copies src to dst until src ends, then half-closes dst so the other
// direction can finish.
func pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	if tc, ok := dst.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// closeAll cuts every forwarded connection.
func (f *forwarder) closeAll() {
	f.mu.Lock()
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}
