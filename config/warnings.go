package config

// warnings.go finds what loads and validates but probably does not do what
// the file's author meant. A routes list replaces the default routes
// entirely, so leaving one protocol out of it turns that protocol off
// without a word: `edgemux check` and start-up say so, with the fix.

import (
	"errors"
	"fmt"
	"sort"
)

// ErrWarning is what every warning of Warnings wraps.
var ErrWarning = errors.New("config: warning")

// servedProto is a protocol the sniffer detects and edgemux serves: what
// is lost when no route takes it, and the route that takes it.
type servedProto struct {
	proto string
	lost  string // who is turned away
	route string // the route to add
}

var servedProtos = []servedProto{
	{"private", "devices speaking the private protocol (edgemux pub/sub, the Go client) are quarantined", "{match: {proto: private}, action: handle}"},
	{"websocket", "", "{match: {proto: websocket}, action: handle}"}, // lost: websocketLost
	{"modbus", "Modbus masters (mbpoll, PLCs, SCADA) are quarantined", "{match: {proto: modbus}, action: handle}"},
	{"coap", "CoAP over TCP is quarantined (CoAP over UDP goes by udp.routes)", "{match: {proto: coap}, action: handle}"},
	{"http", "plain HTTP is quarantined: /healthz, /metrics and the dashboard do not answer", "{match: {proto: http}, action: admin}"},
}

// Warnings reports, in file order, each of:
//   - a protocol edgemux serves that no route names, so its connections
//     end in quarantine (or, for WebSocket, at the admin's 404);
//   - a pool that no route, udp.routes entry or sniff.probe sends
//     anything, so its workers idle;
//   - a datagram class whose default udp route went with its pool, so
//     its datagrams are dropped.
//
// Each *FieldError (wrapping ErrWarning) names the key, its line and the
// fix. A config that validates is expected; nil means nothing to say.
func (c Config) Warnings() []*FieldError {
	var out []*FieldError
	warn := func(path, lineOf, format string, args ...any) {
		out = append(out, &FieldError{Path: path, Line: c.LineOf(lineOf),
			Problem: fmt.Sprintf(format, args...), kind: ErrWarning})
	}
	lost := map[string]bool{}
	for _, sp := range servedProtos {
		what := c.unroutedProto(sp)
		if what == "" {
			continue
		}
		lost[sp.proto] = true
		warn("routes", "routes", "no route for proto %s: %s; add - %s to routes%s, or - {match: {proto: %s}, action: quarantine} to turn it off on purpose",
			sp.proto, what, sp.route, beforeHTTP(sp.proto), sp.proto)
	}
	for _, name := range c.idlePools() {
		if _, inFile := c.Lines["pools."+name]; !inFile && lost[name] {
			continue // said above: its protocol has no route
		}
		warn("pools."+name, "pools."+name, "no route sends it anything, so its workers (%d) idle; route to it (routes: - {match: {proto: ...}, action: handle, pool: %s}) or remove it (%s: ~)",
			c.Pools[name].Workers, name, name)
	}
	for _, class := range c.droppedClasses() {
		warn("udp.routes."+class, "pools."+Defaults().UDP.Routes[class], "no pool takes %s datagrams: their default pool %s is removed, so they are counted and dropped; route them (udp: {routes: {%s: POOL}}) or write %s: \"\" to drop them on purpose",
			class, Defaults().UDP.Routes[class], class, class)
	}
	sort.SliceStable(out, func(i, j int) bool { return sortLine(out[i]) < sortLine(out[j]) })
	return out
}

// beforeHTTP says where a websocket route must go.
func beforeHTTP(proto string) string {
	if proto == "websocket" {
		return " before the http route"
	}
	return ""
}

// unroutedProto says what happens to sp's connections when no route names
// its protocol and they fall to a catch-all quarantine (or to no route);
// "" when a route names it or a catch-all takes it somewhere.
func (c Config) unroutedProto(sp servedProto) string {
	if c.routeNames(sp.proto) {
		return ""
	}
	switch sp.proto {
	case "http":
		if !c.Admin.Enabled {
			return "" // no admin: plain HTTP has nothing to answer it
		}
	case "websocket":
		// Without a websocket route the sniffer does not tell upgrades
		// from plain HTTP: they go where http goes.
		return c.websocketLost()
	}
	if r := c.firstRouteFor(sp.proto); r == nil || r.Action == "quarantine" {
		return sp.lost
	}
	return ""
}

func (c Config) websocketLost() string {
	r := c.firstRouteFor("http")
	switch {
	case r == nil || r.Action == "quarantine":
		return "WebSocket upgrades are taken for plain HTTP and quarantined, so /ws and the dashboard's live feed do not answer"
	case r.Action == "admin":
		return fmt.Sprintf("WebSocket upgrades are taken for plain HTTP, so %s and the dashboard's live feed answer 404", c.WebSocket.Path)
	}
	return ""
}

// routeNames reports whether a route names proto in its match.
func (c Config) routeNames(proto string) bool {
	for _, r := range c.Routes {
		if r.Match.Proto == proto {
			return true
		}
	}
	return false
}

// firstRouteFor returns the first route that takes every connection of
// proto: its match names proto or any, with no source or SNI condition.
func (c Config) firstRouteFor(proto string) *Route {
	for i, r := range c.Routes {
		if (r.Match.Proto == proto || r.Match.Proto == anyProto) && r.Match.Source == "" && r.Match.SNI == "" {
			return &c.Routes[i]
		}
	}
	return nil
}

// idlePools lists, sorted, the pools other than quarantine that no
// handle route, udp.routes entry (with UDP on) or sniff.probe names.
func (c Config) idlePools() []string {
	used := map[string]bool{quarantinePool: true, c.Sniff.Probe: true}
	for _, r := range c.Routes {
		if r.Action == "handle" {
			used[r.Pool] = true
		}
	}
	if c.UDP.Enabled {
		for _, pool := range c.UDP.Routes {
			used[pool] = true
		}
	}
	var idle []string
	for name := range c.Pools {
		if !used[name] {
			idle = append(idle, name)
		}
	}
	sort.Strings(idle)
	return idle
}

// droppedClasses lists the datagram classes that have a default route,
// have none now, and that the file did not turn off itself (`rudp: ""`):
// their default went with the pool it named.
func (c Config) droppedClasses() []string {
	if !c.UDP.Enabled {
		return nil
	}
	var dropped []string
	for _, class := range datagramClasses {
		_, set := c.Lines["udp.routes."+class]
		if c.UDP.Routes[class] == "" && Defaults().UDP.Routes[class] != "" && !set {
			dropped = append(dropped, class)
		}
	}
	return dropped
}
