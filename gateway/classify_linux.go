package gateway

import (
	"bytes"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/sniff"
)

// sniff peeks at a connection's first bytes without consuming them and
// acts on the verdict. expired is true when the sniff deadline passed.
func (l *loop) sniff(rt *runtimeConfig, fd int, gen uint32, s *registry.Slot, expired bool) {
	budget := rt.budget
	n, err := peekFD(fd, l.peek[:rt.peekMax])
	switch {
	case err != nil && !errors.Is(err, errAgain):
		l.closeUnclassified(fd, gen)
		return
	case err == nil && n == 0: // the peer closed before saying anything classifiable
		l.closeUnclassified(fd, gen)
		return
	case n <= 0: // nothing there yet
		if expired {
			l.silent(rt, fd, gen, s)
		}
		return
	}
	prefix := l.peek[:n]
	look := prefix
	if len(look) > budget {
		look = look[:budget]
	}
	res := sniff.Detect(look)
	if l.st.on {
		l.st.mark(stSniff)
	}
	switch res.Verdict {
	case sniff.Match:
		p := res.Proto
		var sni string
		wait := false
		switch p {
		case sniff.TLS:
			sni, wait = l.serverName(rt, prefix)
		case sniff.HTTP:
			p, wait = l.upgrade(rt, fd, gen, s, prefix, expired)
		}
		if p == sniff.Unknown { // answered and closed
			return
		}
		if wait && !expired {
			return
		}
		l.classified(rt, fd, gen, s, p, sni)
	case sniff.NeedMore:
		switch {
		case len(look) >= budget || res.Need > budget:
			l.quarantine(rt, fd, gen, s, sniff.Unknown, protocols.ReasonOversize)
		case expired:
			if r := sniff.DetectExpired(look); r.Verdict == sniff.Match {
				l.classified(rt, fd, gen, s, r.Proto, "") // a bare CoAP CSM, say
				return
			}
			l.quarantine(rt, fd, gen, s, sniff.Unknown, protocols.ReasonTimeout)
		}
	default:
		l.classified(rt, fd, gen, s, sniff.Unknown, "")
	}
}

// serverName extracts the TLS SNI when some route needs it, and reports
// whether the loop should wait for more of the ClientHello.
func (l *loop) serverName(rt *runtimeConfig, prefix []byte) (string, bool) {
	if !rt.needSNI {
		return "", false
	}
	name, need, err := sniff.TLSServerName(prefix)
	if err != nil {
		return "", false
	}
	if need > 0 && need <= rt.tlsBudget {
		return "", true
	}
	return name, false
}

// upgrade refines HTTP into WebSocket when some route tells them apart: a
// GET waits for its whole header block (up to websocket.max_header_bytes),
// which is answered with 431 when it is larger. It returns the protocol,
// whether to wait for more bytes, or Unknown when it closed the connection.
//
// A GET whose header block is still incomplete when the sniff deadline
// passes (expired) is routed as WebSocket: the WebSocket handler waits for
// the rest within websocket.handshake_timeout and answers 101, its own
// 400/404 for a request that turns out not to be an upgrade, or 408. Such a
// request never reaches the admin handler: what the gateway would answer a
// slow sender must not depend on how slowly it sends (and a trickled request
// to the admin endpoints is what a slowloris client looks like).
func (l *loop) upgrade(rt *runtimeConfig, fd int, gen uint32, s *registry.Slot, prefix []byte, expired bool) (sniff.Proto, bool) {
	if !rt.splitWS || !bytes.HasPrefix(prefix, []byte("GET ")) {
		return sniff.HTTP, false
	}
	ws, need := sniff.HTTPUpgrade(prefix)
	switch {
	case ws:
		return sniff.WebSocket, false
	case !need:
		return sniff.HTTP, false
	case len(prefix) < rt.httpBudget && expired:
		return sniff.WebSocket, false
	case len(prefix) < rt.httpBudget:
		return sniff.HTTP, true
	}
	writeFD(fd, []byte(response431))
	l.g.book.Record(s.Peer(), protocols.ReasonOversize, prefix[:min(len(prefix), 64)])
	l.g.metrics.classified(sniff.HTTP, "quarantine:"+string(protocols.ReasonOversize), l.g.nowMs()-s.OpenedAt())
	l.g.closeConn(fd, gen)
	return sniff.Unknown, false
}

const response431 = "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"

// silent handles a peer that said nothing before the deadline: probe it
// when the listener has a probe, else quarantine it.
func (l *loop) silent(rt *runtimeConfig, fd int, gen uint32, s *registry.Slot) {
	if p := l.g.byPool[rt.probePool]; p != nil {
		l.g.metrics.classified(sniff.Unknown, "probe", l.g.nowMs()-s.OpenedAt())
		l.handOff(fd, gen, s, p, firstProto(p), protocols.ReasonNone, true)
		return
	}
	l.quarantine(rt, fd, gen, s, sniff.Unknown, protocols.ReasonTimeout)
}

func firstProto(p *pool) sniff.Proto {
	for i, h := range p.handlers {
		if h != nil {
			return sniff.Proto(i)
		}
	}
	return sniff.Unknown
}

// classified applies the first route that fits a classified connection.
func (l *loop) classified(rt *runtimeConfig, fd int, gen uint32, s *registry.Slot, p sniff.Proto, sni string) {
	r := rt.pick(p, sni, s.Peer().Addr())
	if r == nil || r.action == actionQuarantine {
		reason := protocols.ReasonRouted
		if p == sniff.Unknown {
			reason = protocols.ReasonNoMatch
		}
		l.quarantine(rt, fd, gen, s, p, reason)
		return
	}
	l.g.metrics.classified(p, r.actionName(), l.g.nowMs()-s.OpenedAt())
	switch r.action {
	case actionHandle:
		pl := l.g.byPool[r.pool]
		if pl == nil || pl.handlerFor(p) == nil {
			l.quarantine(rt, fd, gen, s, p, protocols.ReasonRouted)
			return
		}
		l.handOff(fd, gen, s, pl, p, protocols.ReasonNone, false)
	case actionForward:
		if f := l.detach(fd, gen); f != nil {
			l.g.fwd.forward(f, r.backend, r.dialTimeout)
		}
	case actionAdmin:
		if f := l.detach(fd, gen); f != nil {
			l.g.admin.serve(f)
		}
	}
}

func (r *compiledRoute) actionName() string {
	for name, a := range actionNames {
		if a == r.action {
			return name
		}
	}
	return "?"
}

// quarantine hands a connection to the quarantine pool, or closes it and
// records it when there is no such pool.
func (l *loop) quarantine(rt *runtimeConfig, fd int, gen uint32, s *registry.Slot, p sniff.Proto, reason protocols.Reason) {
	peer := s.Peer()
	l.g.metrics.classified(p, "quarantine:"+string(reason), l.g.nowMs()-s.OpenedAt())
	q := l.g.byPool["quarantine"]
	if q == nil {
		l.g.book.Record(peer, reason, nil)
		l.g.closeConn(fd, gen)
		return
	}
	l.handOff(fd, gen, s, q, p, reason, false)
}

// expire handles a loop timer: the sniff deadline.
func (l *loop) expire(t timer) {
	rt := l.g.rt.Load()
	fd, gen := int(t.id>>32), uint32(t.id)
	s := l.g.reg.Live(fd, gen)
	if s == nil || s.State() != registry.Sniffing {
		return // classified or closed meanwhile: not a stale event
	}
	l.sniff(rt, fd, gen, s, true)
}

// closeConn runs the close sequence for fd if it is still connection gen;
// it reports whether this call closed it.
func (g *Gateway) closeConn(fd int, gen uint32) bool {
	prev, ok := g.reg.BeginClose(fd, gen)
	if !ok {
		return false
	}
	s := g.reg.Slot(fd)
	ip := s.Peer().Addr()
	// No EPOLL_CTL_DEL: close(2) takes the socket out of the epoll set
	// (nothing else holds it: sockets are CLOEXEC, and detach, which dups
	// one, deletes it itself), so that would be a system call per close
	// for nothing. An event already returned for it meets the registry's
	// generation check, as it would after a DEL.
	g.reg.EndClose(fd, gen)
	unix.Close(fd)
	if prev == registry.Sniffing {
		g.limits.doneSniffing(ip)
	}
	g.limits.closed(ip)
	return true
}

// detach takes a classified connection out of epoll and the registry and
// returns it as an *os.File for net/http or a forwarder; the fd is dup'ed
// by net.FileConn, so the registry slot is freed here.
func (l *loop) detach(fd int, gen uint32) *detached {
	s := l.g.reg.Slot(fd)
	peer := s.Peer()
	prev, ok := l.g.reg.BeginClose(fd, gen)
	if !ok {
		return nil
	}
	if prev == registry.Sniffing {
		l.g.limits.doneSniffing(peer.Addr())
	}
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	c, f, err := fileConn(fd)
	l.g.reg.EndClose(fd, gen)
	f.Close()
	l.g.limits.closed(peer.Addr())
	if err != nil {
		return nil
	}
	return &detached{conn: c, peer: peer}
}

// Reasons travel to the worker as a small index in the slot's pending bits.
var reasonNames = [...]protocols.Reason{
	protocols.ReasonNone, protocols.ReasonTimeout, protocols.ReasonNoMatch,
	protocols.ReasonOversize, protocols.ReasonMalformed, protocols.ReasonPanic,
	protocols.ReasonRouted,
}

func reasonIndex(r protocols.Reason) int {
	for i, n := range reasonNames {
		if n == r {
			return i
		}
	}
	return 0
}

func (l *loop) inlineIndex(p *pool) int {
	for i, q := range l.g.pools {
		if q == p {
			return i
		}
	}
	return 0
}
