package gateway

import (
	"net/netip"
)

// Wiring the datagram path when Run starts: the sockets, then a lane from
// every loop that has one to every worker its datagrams may go to.

// startUDP opens one UDP socket per loop, or on the first udp.sockets
// loops, and connects them to the datagram workers.
func (g *Gateway) startUDP(addr netip.AddrPort) error {
	c := g.cfg.UDP
	if !c.Enabled {
		return nil
	}
	for i, l := range g.loops {
		if c.Sockets > 0 && i >= c.Sockets {
			break
		}
		u, err := l.openUDP(addr)
		if err != nil {
			return err
		}
		g.udp = append(g.udp, u)
	}
	u := g.udp[0]
	g.log.Info("udp sockets", "count", len(g.udp), "batch", len(u.msgs), "max_datagram", u.max,
		"read_buffer", u.rcvbuf, "write_buffer", u.sndbuf, "asked_read", c.ReadBuffer, "asked_write", c.WriteBuffer,
		"forced", u.forced)
	if (c.ReadBuffer > 0 && u.rcvbuf < 2*c.ReadBuffer) || (c.WriteBuffer > 0 && u.sndbuf < 2*c.WriteBuffer) {
		g.log.Warn("udp socket buffers smaller than udp.read_buffer/write_buffer: the kernel caps them at net.core.rmem_max/wmem_max unless edgemux runs as root",
			"read_buffer", u.rcvbuf/2, "write_buffer", u.sndbuf/2)
	}
	for _, l := range g.loops {
		if l.udp != nil {
			if err := g.connectDatagrams(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// connectDatagrams builds loop l's datagram routes: for each class a pool
// serves, a lane to each of the pool's workers (shared by the classes a
// pool serves), or under the inline policy to the loop's own worker.
func (g *Gateway) connectDatagrams(l *loop) error {
	c := g.cfg.UDP
	inline := map[*worker]*dgramLane{}
	for class, p := range g.dgPools {
		if p == nil {
			continue
		}
		r := &dgramRoute{h: p.dgram[class]}
		if len(l.inline) > 0 {
			w := l.inline[l.inlineIndex(p)]
			if inline[w] == nil {
				lane, err := newLane(w, 1, c.MaxDatagram, true)
				if err != nil {
					return err
				}
				inline[w] = lane
			}
			r.inline = inline[w]
		} else {
			for _, w := range p.workers {
				if w.dg.lanes[l.idx] == nil {
					lane, err := newLane(w, c.Queue, c.MaxDatagram, false)
					if err != nil {
						return err
					}
					w.dg.lanes[l.idx] = lane
				}
				r.lanes = append(r.lanes, w.dg.lanes[l.idx])
			}
		}
		l.dgRoutes[class] = r
	}
	l.dirty = make([]*dgramLane, 0, len(g.workers)+len(g.pools))
	l.ahead = max(1, c.Queue/2)
	return nil
}

// openInlineDatagrams starts the datagram handlers of the loop's own
// workers under the inline policy, on the loop's goroutine, which calls
// them from then on: index l.idx of the loops. They send from the loop's
// socket, or another loop's when udp.sockets left this one without.
func (l *loop) openInlineDatagrams() {
	g := l.g
	for _, w := range l.inline {
		if w.dg == nil || len(g.udp) == 0 {
			continue
		}
		u := l.udp
		if u == nil {
			u = g.udp[l.idx%len(g.udp)]
		}
		w.dg.open(l.idx, len(g.loops), newDgramOut(g, u))
	}
}
