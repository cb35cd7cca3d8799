package gateway

import (
	"fmt"
	"net/netip"

	"github.com/edgemux/edgemux/route"
)

// startLoops binds the shared port once per loop (SO_REUSEPORT) and starts
// the loops. With port 0 the first socket picks the port and the others
// join it.
func (g *Gateway) startLoops() error {
	addr, err := netip.ParseAddrPort(g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("gateway: listen %q: %w", g.cfg.Listen, err)
	}
	n := defaultLoops(g.cfg.Loops)
	inline := g.cfg.Dispatch.Policy == "inline"
	for i := range n {
		l := newLoop(g, i)
		g.loops = append(g.loops, l)
		bound, err := l.open(addr)
		if err != nil {
			return err
		}
		addr = bound
		if err := g.connect(l); err != nil {
			return err
		}
		if inline {
			for _, p := range g.pools {
				w := newWorker(g, p, -1, -1, 0)
				w.rbuf = make([]byte, readBufSize)
				w.wake = func() bool { l.post(loopCmdWakeInline); return false }
				l.inline = append(l.inline, w)
			}
		}
	}
	g.addr = addr
	if err := g.startUDP(addr); err != nil {
		return err
	}
	for _, l := range g.loops {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			l.run()
		}()
	}
	return nil
}

// connect gives loop l one ring to every worker: an SPSC pair in which l
// pushes and the worker pops.
func (g *Gateway) connect(l *loop) error {
	for wi, w := range g.workers {
		r, err := route.NewRing(g.cfg.Dispatch.RingSize)
		if err != nil {
			return err
		}
		l.rings[wi] = r
		w.rings[l.idx] = r
	}
	return nil
}

func (g *Gateway) startWorkers() {
	if g.cfg.Dispatch.Policy == "inline" {
		return // the loops run them
	}
	for _, w := range g.workers {
		w.start()
	}
}
