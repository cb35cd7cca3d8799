package gateway

import (
	"fmt"
	"sort"
	"time"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/registry"
	"github.com/edgemux/edgemux/route"
	"github.com/edgemux/edgemux/sniff"
)

// quarantineBit marks the quarantine pool in a worker's allowed mask; it
// is above every sniff.Proto.
const quarantineBit = 15

// pool is a group of workers dedicated to one protocol (or, when the YAML
// says so, a few): fault isolation between protocols by default, with the
// dispatcher spreading traffic patterns inside the pool.
type pool struct {
	name       string
	quarantine bool
	idle       time.Duration
	pattern    route.Pattern
	handlers   [16]protocols.Handler // by sniff.Proto; quarantine: [0] serves all
	workers    []*worker
	disp       *route.Dispatcher
}

func (g *Gateway) buildPools(handlers map[string]protocols.Handler) error {
	policy, err := route.ParsePolicy(g.cfg.Dispatch.Policy)
	if err != nil {
		return err
	}
	loops := defaultLoops(g.cfg.Loops)
	names := make([]string, 0, len(g.cfg.Pools))
	for name := range g.cfg.Pools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pc := g.cfg.Pools[name]
		p := &pool{name: name, quarantine: name == "quarantine", idle: pc.IdleTimeout, pattern: parsePattern(pc.Pattern)}
		var mask uint64
		if p.quarantine {
			mask = 1 << quarantineBit
			p.handlers[0] = handlers["quarantine"]
			if p.idle <= 0 {
				p.idle = g.cfg.Quarantine.Hold
			}
		} else {
			protos := pc.Protocols
			if len(protos) == 0 {
				protos = []string{name}
			}
			for _, ps := range protos {
				pr, ok := sniff.ParseProto(ps)
				if !ok {
					return fmt.Errorf("gateway: pool %s: unknown protocol %q", name, ps)
				}
				h := handlers[ps]
				if h == nil {
					return fmt.Errorf("%w %q (pool %s)", ErrNoHandler, ps, name)
				}
				p.handlers[pr] = h
				mask |= 1 << pr
			}
		}
		specs := make([]route.WorkerSpec, pc.Workers)
		for i := range specs {
			specs[i] = route.WorkerSpec{Allowed: mask}
		}
		if p.disp, err = route.NewDispatcher(policy, specs, g.cfg.Dispatch.Window); err != nil {
			return err
		}
		for i := range pc.Workers {
			w := newWorker(g, p, len(g.workers), i, loops)
			p.workers = append(p.workers, w)
			g.workers = append(g.workers, w)
		}
		g.pools = append(g.pools, p)
		g.byPool[name] = p
	}
	if pp := g.cfg.Sniff.Probe; pp != "" {
		p := g.byPool[pp]
		if p == nil {
			return fmt.Errorf("gateway: probe pool %q does not exist", pp)
		}
		for _, h := range p.handlers {
			if h != nil {
				if _, ok := h.(protocols.Prober); !ok {
					return fmt.Errorf("%w: %s", ErrNotProber, pp)
				}
			}
		}
	}
	return nil
}

func parsePattern(s string) route.Pattern {
	switch s {
	case "bursty":
		return route.PatternBursty
	case "steady":
		return route.PatternSteady
	case "long-period":
		return route.PatternLongPeriod
	}
	return route.PatternUnknown
}

func (p *pool) handlerFor(pr sniff.Proto) protocols.Handler {
	if p.quarantine {
		return p.handlers[0]
	}
	if int(pr) < len(p.handlers) {
		return p.handlers[pr]
	}
	return nil
}

// protoBit is the dispatcher's protocol number for pr in this pool.
func (p *pool) protoBit(pr sniff.Proto) uint8 {
	if p.quarantine {
		return quarantineBit
	}
	return uint8(pr)
}

// pick chooses a worker of the pool for a new connection; -1 means the
// loop handles it inline.
func (p *pool) pick(pr sniff.Proto) int {
	return p.disp.Pick(p.protoBit(pr), p.pattern)
}

// observe feeds the entropy dispatcher what the worker just served, with
// the traffic pattern learnt from the connection's event rate so far.
func (p *pool) observe(local int, s *registry.Slot) {
	if local < 0 {
		return
	}
	span := (s.LastActive() - s.OpenedAt()) / 100 // 100 ms ticks
	pat := route.Classify(s.Events(), span)
	if pat == route.PatternUnknown {
		pat = p.pattern
	}
	p.disp.Observe(local, p.protoBit(sniff.Proto(s.Proto())), pat)
}

func (p *pool) release(local int) {
	if local >= 0 {
		p.disp.Release(local)
	}
}
