package gateway

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// adminConns counts the admin server's connections, in all and per
// source address, so that one address (or a few) holding idle keep-alive
// connections cannot lock the probes out. A newcomer over a cap takes the
// place of the longest-idle connection (of its own source, at the
// per-source cap): closing a kept-alive connection between requests is
// what HTTP allows any server to do. When nothing is idle it is answered
// 429 (its source is at its cap) or 503 (all are busy), with a body and
// Retry-After, never a bare reset.
type adminConns struct {
	g *Gateway

	mu        sync.Mutex
	max       int
	perIP     int
	byIP      map[netip.Addr]int
	conns     map[net.Conn]*adminConn
	idleSeq   uint64                // orders idle connections: lower went idle earlier
	lingering map[net.Conn]struct{} // refused connections being answered
	closed    bool
	wg        sync.WaitGroup // the refusals' goroutines
}

// adminConn is what the accounting knows of one connection.
type adminConn struct {
	ip   netip.Addr
	idle uint64 // idleSeq when it went idle between requests; 0 = busy or new
}

// Refusals: the answer is written, then the peer has refuseLinger to read
// it and hang up while what it sent is drained (closing with unread input
// would reset the connection, and the answer with it). At most
// maxLingering refusals linger at once; beyond that the connection is
// closed at once.
const (
	refuseLinger = 2 * time.Second
	refuseDrain  = 64 << 10
	maxLingering = 128
)

func newAdminConns(g *Gateway, max, perIP int) *adminConns {
	return &adminConns{
		g: g, max: max, perIP: perIP,
		byIP:      map[netip.Addr]int{},
		conns:     map[net.Conn]*adminConn{},
		lingering: map[net.Conn]struct{}{},
	}
}

// setLimits applies new caps; connections over them are not closed, the
// caps only stop new ones.
func (c *adminConns) setLimits(max, perIP int) {
	c.mu.Lock()
	c.max, c.perIP = max, perIP
	c.mu.Unlock()
}

// admit counts conn in, making room by closing an idle connection when a
// cap is reached. It reports false when conn was refused (and answered).
func (c *adminConns) admit(conn net.Conn, ip netip.Addr) bool {
	ip = ip.Unmap()
	c.mu.Lock()
	var victim net.Conn
	status, reason := 0, ""
	switch {
	case c.byIP[ip] >= c.perIP:
		if victim = c.oldestIdle(ip, true); victim == nil {
			status, reason = http.StatusTooManyRequests, "admin_max_conns_per_ip"
		}
	case len(c.conns) >= c.max:
		if victim = c.oldestIdle(ip, false); victim == nil {
			status, reason = http.StatusServiceUnavailable, "admin_max_conns"
		}
	}
	if victim != nil {
		c.dropLocked(victim)
	}
	if status == 0 {
		c.conns[conn] = &adminConn{ip: ip}
		c.byIP[ip]++
	}
	c.mu.Unlock()
	if victim != nil {
		c.g.metrics.refused.WithLabelValues("admin_idle_reclaimed").Inc()
		victim.Close()
	}
	switch status {
	case http.StatusTooManyRequests:
		c.refuse(conn, status, reason, "too many admin connections from "+ip.String()+" (admin.max_conns_per_ip); try again")
		return false
	case http.StatusServiceUnavailable:
		c.refuse(conn, status, reason, "the admin server is at its connection limit (admin.max_conns); try again")
		return false
	}
	return true
}

// oldestIdle finds the connection that went idle first, from ip only or
// from any source.
func (c *adminConns) oldestIdle(ip netip.Addr, sameIP bool) net.Conn {
	var best net.Conn
	var bestSeq uint64
	for conn, ac := range c.conns {
		if ac.idle == 0 || (sameIP && ac.ip != ip) {
			continue
		}
		if best == nil || ac.idle < bestSeq {
			best, bestSeq = conn, ac.idle
		}
	}
	return best
}

// dropLocked uncounts conn; c.mu is held.
func (c *adminConns) dropLocked(conn net.Conn) {
	ac, ok := c.conns[conn]
	if !ok {
		return
	}
	delete(c.conns, conn)
	if c.byIP[ac.ip]--; c.byIP[ac.ip] <= 0 {
		delete(c.byIP, ac.ip)
	}
}

// forget uncounts a connection that never reached the server.
func (c *adminConns) forget(conn net.Conn) {
	c.mu.Lock()
	c.dropLocked(conn)
	c.mu.Unlock()
}

// state is the server's ConnState hook: it tracks which connections sit
// idle between requests, and uncounts closed ones.
func (c *adminConns) state(conn net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case http.StateIdle:
		if ac := c.conns[conn]; ac != nil {
			c.idleSeq++
			ac.idle = c.idleSeq
		}
	case http.StateActive:
		if ac := c.conns[conn]; ac != nil {
			ac.idle = 0
		}
	case http.StateClosed, http.StateHijacked:
		c.dropLocked(conn)
	}
}

// refuse answers conn with status and msg, counts reason, and closes it
// once the peer has read the answer (or refuseLinger passed).
func (c *adminConns) refuse(conn net.Conn, status int, reason, msg string) {
	c.g.metrics.refused.WithLabelValues(reason).Inc()
	c.mu.Lock()
	if c.closed || len(c.lingering) >= maxLingering {
		c.mu.Unlock()
		conn.Close()
		return
	}
	c.lingering[conn] = struct{}{}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		conn.SetDeadline(time.Now().Add(refuseLinger))
		conn.Write(refusal(status, msg))
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(conn, refuseDrain))
		c.mu.Lock()
		delete(c.lingering, conn)
		c.mu.Unlock()
		conn.Close()
	}()
}

// refusal is a whole HTTP response that ends the connection.
func refusal(status int, msg string) []byte {
	body := "edgemux: " + msg + "\n"
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n" +
		"Connection: close\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n" +
		"Cache-Control: no-store\r\nRetry-After: 1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// close ends the refusals still lingering and waits for their goroutines.
func (c *adminConns) close() {
	c.mu.Lock()
	c.closed = true
	for conn := range c.lingering {
		conn.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
}
