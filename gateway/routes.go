package gateway

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/sniff"
)

// runtimeConfig is the part of the configuration that Reload may swap
// while connections live: routes, limits and sniff settings. Loops read it
// through an atomic pointer, once per event batch.
type runtimeConfig struct {
	routes       []compiledRoute
	needSNI      bool // some route matches on SNI: peek ClientHellos whole
	splitWS      bool // some route matches websocket: peek GET headers whole
	budget       int
	tlsBudget    int
	httpBudget   int // header bytes peeked to tell WebSocket from HTTP
	peekMax      int // the most any of the above peeks, plus one
	deadline     time.Duration
	probePool    string
	probeTimeout time.Duration
	limits       config.Limits
}

type action uint8

const (
	actionHandle action = iota
	actionForward
	actionAdmin
	actionQuarantine
)

var actionNames = map[string]action{
	"handle": actionHandle, "forward": actionForward,
	"admin": actionAdmin, "quarantine": actionQuarantine,
}

type compiledRoute struct {
	anyProto    bool
	proto       sniff.Proto
	sni         string // exact, or ".suffix" for "*.suffix"
	source      netip.Prefix
	action      action
	pool        string
	backend     string
	dialTimeout time.Duration
}

func compileRuntime(cfg config.Config) (*runtimeConfig, error) {
	rt := &runtimeConfig{
		budget:       cfg.Sniff.Budget,
		tlsBudget:    cfg.Sniff.TLSBudget,
		deadline:     cfg.Sniff.Deadline,
		probePool:    cfg.Sniff.Probe,
		probeTimeout: cfg.Sniff.ProbeTimeout,
		limits:       cfg.Limits,
	}
	if rt.tlsBudget < rt.budget {
		rt.tlsBudget = rt.budget
	}
	for i, r := range cfg.Routes {
		cr, err := compileRoute(r)
		if err != nil {
			return nil, fmt.Errorf("gateway: routes[%d]: %w", i, err)
		}
		if cr.sni != "" {
			rt.needSNI = true
		}
		if !cr.anyProto && cr.proto == sniff.WebSocket {
			rt.splitWS = true
		}
		rt.routes = append(rt.routes, cr)
	}
	rt.httpBudget = max(rt.budget, wsHeaderBytes(cfg))
	rt.peekMax = rt.budget
	if rt.needSNI {
		rt.peekMax = max(rt.peekMax, rt.tlsBudget)
	}
	if rt.splitWS {
		rt.peekMax = max(rt.peekMax, rt.httpBudget)
	}
	rt.peekMax = min(rt.peekMax, peekCap) + 1
	return rt, nil
}

func compileRoute(r config.Route) (compiledRoute, error) {
	cr := compiledRoute{backend: r.Backend, dialTimeout: r.DialTimeout, pool: r.Pool}
	act, ok := actionNames[r.Action]
	if !ok {
		return cr, fmt.Errorf("unknown action %q", r.Action)
	}
	cr.action = act
	switch r.Match.Proto {
	case "*", "":
		cr.anyProto = true
	default:
		p, ok := sniff.ParseProto(r.Match.Proto)
		if !ok {
			return cr, fmt.Errorf("unknown protocol %q", r.Match.Proto)
		}
		cr.proto = p
		if cr.pool == "" {
			cr.pool = p.String()
		}
	}
	cr.sni = strings.ToLower(strings.TrimPrefix(r.Match.SNI, "*"))
	if r.Match.Source != "" {
		pfx, err := netip.ParsePrefix(r.Match.Source)
		if err != nil {
			return cr, err
		}
		cr.source = pfx.Masked()
	}
	if cr.dialTimeout <= 0 {
		cr.dialTimeout = 2 * time.Second
	}
	return cr, nil
}

// pick returns the first route that fits, or nil: then the connection is
// quarantined.
func (rt *runtimeConfig) pick(p sniff.Proto, sni string, peer netip.Addr) *compiledRoute {
	for i := range rt.routes {
		r := &rt.routes[i]
		if !r.anyProto && r.proto != p {
			continue
		}
		if r.source.IsValid() && !r.source.Contains(peer.Unmap()) {
			continue
		}
		if r.sni != "" && !sniMatches(r.sni, sni) {
			continue
		}
		return r
	}
	return nil
}

func sniMatches(pattern, name string) bool {
	name = strings.ToLower(name)
	if strings.HasPrefix(pattern, ".") {
		return strings.HasSuffix(name, pattern) && len(name) > len(pattern)
	}
	return name == pattern
}

// peekCap is the largest peek any configuration may ask for; a loop's peek
// buffer is this big so Reload can raise budgets.
const peekCap = 64 << 10

// wsHeaderBytes is the WebSocket handshake header limit.
func wsHeaderBytes(cfg config.Config) int { return cfg.WebSocket.MaxHeaderBytes }
