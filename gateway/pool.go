package gateway

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
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
	handlers   [16]protocols.Handler                 // by sniff.Proto; quarantine: [0] serves all
	dgram      [numClasses]protocols.DatagramHandler // by sniff.DatagramClass, from udp.routes
	workers    []*worker
	disp       *route.Dispatcher
	history    *route.History // class per source address; nil = none
}

func (g *Gateway) buildPools(handlers map[string]protocols.Handler, dgram map[string]protocols.DatagramHandler) error {
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
		if err := g.routeDatagrams(p, dgram); err != nil {
			return err
		}
		mask, err := p.takeProtocols(pc, handlers, g.cfg.Quarantine.Hold)
		if err != nil {
			return err
		}
		specs := make([]route.WorkerSpec, pc.Workers)
		for i := range specs {
			specs[i] = route.WorkerSpec{Allowed: mask}
		}
		if p.disp, err = route.NewDispatcher(policy, specs, g.cfg.Dispatch.Window); err != nil {
			return err
		}
		if n := g.cfg.Dispatch.History; n > 0 && policy == route.Entropy {
			p.history = route.NewHistory(n)
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

// takeProtocols gives p the handlers of the protocols it takes and returns
// its dispatcher mask. A pool without protocols takes the one it is named
// after, unless it serves datagrams only; the quarantine pool takes what
// the routes send it.
func (p *pool) takeProtocols(pc config.Pool, handlers map[string]protocols.Handler, hold time.Duration) (uint64, error) {
	if p.quarantine {
		p.handlers[0] = handlers["quarantine"]
		if p.idle <= 0 {
			p.idle = hold
		}
		return 1 << quarantineBit, nil
	}
	protos := pc.Protocols
	if len(protos) == 0 && !p.servesDatagrams() {
		protos = []string{p.name}
	}
	var mask uint64
	for _, ps := range protos {
		pr, ok := sniff.ParseProto(ps)
		if !ok {
			return 0, fmt.Errorf("gateway: pool %s: unknown protocol %q", p.name, ps)
		}
		h := handlers[ps]
		if h == nil {
			return 0, fmt.Errorf("%w %q (pool %s)", ErrNoHandler, ps, p.name)
		}
		p.handlers[pr] = h
		mask |= 1 << pr
	}
	return mask, nil
}

// routeDatagrams gives p the datagram handlers of the classes udp.routes
// sends it. A class routed to a pool without a handler is an error, as a
// protocol is; a class with no route is counted and dropped by the loops.
// With udp.enabled off no datagram arrives, so no route is taken.
func (g *Gateway) routeDatagrams(p *pool, handlers map[string]protocols.DatagramHandler) error {
	if !g.cfg.UDP.Enabled {
		return nil
	}
	for name, target := range g.cfg.UDP.Routes {
		if target != p.name {
			continue
		}
		c, ok := parseDatagramClass(name)
		if !ok || c == sniff.DatagramUnknown {
			return fmt.Errorf("gateway: udp.routes: unknown datagram class %q", name)
		}
		h := handlers[name]
		if h == nil {
			return fmt.Errorf("%w %q (udp.routes, pool %s)", ErrNoHandler, name, p.name)
		}
		p.dgram[c] = h
		g.dgPools[c] = p
	}
	return nil
}

// parseDatagramClass is sniff.DatagramClass by its name.
func parseDatagramClass(name string) (sniff.DatagramClass, bool) {
	for c := range numClasses {
		if sniff.DatagramClass(c).String() == name {
			return sniff.DatagramClass(c), true
		}
	}
	return sniff.DatagramUnknown, false
}

// servesDatagrams reports whether a udp.routes entry sends p datagrams.
func (p *pool) servesDatagrams() bool {
	for _, h := range p.dgram {
		if h != nil {
			return true
		}
	}
	return false
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

// pick chooses a worker of the pool for a new connection from peer; -1
// means the loop handles it inline. The connection is placed as what its
// source's last connection ended as, if the pool's history remembers it,
// and counted at that weight; seed carries the same to the worker (event
// bits 16..31, see seedBits) so that it counts the connection the same way.
func (p *pool) pick(pr sniff.Proto, peer netip.Addr) (worker int, seed uint32) {
	pat, weight, ok := p.history.Lookup(peer)
	if !ok {
		pat = p.pattern
	}
	weight = min(weight, maxSeedWeight)
	worker = p.disp.PickWeighted(p.protoBit(pr), pat, weight)
	return worker, seedBits(pat, weight)
}

// The seed's place in the event bits a loop posts with EvOpen: bits 8..15
// are the quarantine reason, 16..17 the pattern, 18..31 the weight.
const (
	seedShift     = 16
	maxSeedWeight = 1<<14 - 1
)

func seedBits(pat route.Pattern, weight uint32) uint32 {
	return (uint32(pat&3) | min(weight, maxSeedWeight)<<2) << seedShift
}

// seedOf is seedBits read back from an EvOpen event's bits.
func seedOf(bits uint32) (route.Pattern, uint32) {
	v := bits >> seedShift
	return route.Pattern(v & 3), max(v>>2, 1)
}
