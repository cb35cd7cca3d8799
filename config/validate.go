package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is what every FieldError wraps: errors.Is(err, ErrInvalid)
// tells a validation failure from a read or decode failure.
var ErrInvalid = errors.New("config: invalid value")

// FieldError is one problem Validate (or, for the file's shape, Parse)
// found, or one warning Warnings found.
type FieldError struct {
	Path    string // field path, e.g. "limits.max_conns" or "routes[2].backend"; "" = the whole file
	Line    int    // line in the file (of the field or its nearest parent); 0 if unknown
	Problem string // what is wrong, e.g. "must be between 1 and 1000000"
	kind    error  // what Unwrap returns; nil = ErrInvalid
}

// Error reads `path: problem (line N)`, without the line when unknown.
func (e *FieldError) Error() string {
	s := e.Problem
	if e.Path != "" {
		s = e.Path + ": " + s
	}
	if e.Line > 0 {
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	return s
}

// Unwrap returns ErrInvalid for a value Validate refused, ErrDecode for a
// key or value that does not fit the file's shape, ErrWarning for a
// warning.
func (e *FieldError) Unwrap() error {
	if e.kind != nil {
		return e.kind
	}
	return ErrInvalid
}

// Limits on the lists themselves, so a generated file cannot make the
// gateway build thousands of pools or scan thousands of routes.
const (
	maxRoutes    = 1024
	maxPools     = 64
	maxProblems  = 100 // problems reported before the rest are only counted
	maxSNILength = 253 // a DNS name, at most
	maxOrigins   = 256 // websocket.allowed_origins entries
	maxWSPath    = 256 // websocket.path bytes
	// privateHeader is the private protocol's frame header (SPEC.md §1):
	// max_input must hold a whole max_frame frame with it.
	privateHeader = 12
)

// The allowed words of the enumerated fields.
var (
	policies   = []string{"inline", "roundrobin", "entropy", "leastconns"}
	patterns   = []string{"", "bursty", "steady", "long-period"}
	actions    = []string{"handle", "forward", "admin", "quarantine"}
	drops      = []string{"oldest", "newest", "disconnect"}
	slowPolicy = []string{"close", "drop"}
	noValue    = []string{"exception", "zero"}
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
	matchProto = append(slices.Clone(protoNames), anyProto)
)

// Validate checks c and reports every problem at once: an errors.Join of
// *FieldError, each `path: problem (line N)`. It expects a normalized
// config (Parse and Defaults give one). nil means valid.
func (c Config) Validate() error {
	v := &validator{c: &c}
	v.checkRanges()
	v.checkAddresses()
	v.checkEnums()
	v.checkCrossFields()
	v.checkWebSocket()
	v.checkModbus()
	v.checkAdmin()
	v.checkPools()
	v.checkRoutes()
	v.checkUDP()
	v.checkRUDP()
	v.checkCoAP()
	v.checkNorth()
	v.checkCluster()
	return v.result()
}

// validator collects problems in the order the checks find them.
type validator struct {
	c        *Config
	problems []error
	dropped  int
}

func (v *validator) fail(path, format string, args ...any) {
	if len(v.problems) >= maxProblems {
		v.dropped++
		return
	}
	v.problems = append(v.problems, &FieldError{
		Path:    path,
		Line:    v.c.LineOf(path),
		Problem: fmt.Sprintf(format, args...),
	})
}

// result joins the problems in file order, those without a line last.
func (v *validator) result() error {
	sortByLine(v.problems)
	if v.dropped > 0 {
		v.problems = append(v.problems, fmt.Errorf("%w: %d more problems not shown", ErrInvalid, v.dropped))
	}
	return errors.Join(v.problems...)
}

// sortByLine orders problems by their line in the file, those without a
// line last, keeping the order of those on one line.
func sortByLine(problems []error) {
	slices.SortStableFunc(problems, func(a, b error) int {
		return sortLine(a) - sortLine(b)
	})
}

func sortLine(err error) int {
	if fe, ok := err.(*FieldError); ok && fe.Line > 0 {
		return fe.Line
	}
	return math.MaxInt32
}

func (v *validator) checkRanges() {
	for _, r := range intRules {
		if x := r.get(v.c); x < r.min || x > r.max {
			v.fail(r.path, "must be between %d and %d, not %d", r.min, r.max, x)
		}
	}
	for _, r := range durationRules {
		if d := r.get(v.c); d < r.min || d > r.max {
			v.fail(r.path, "must be between %s and %s, not %s",
				shortDuration(r.min), shortDuration(r.max), shortDuration(d))
		}
	}
	if n := v.c.Dispatch.RingSize; n < 64 || n > 1<<20 || n&(n-1) != 0 {
		v.fail("dispatch.ring_size", "must be a power of two between 64 and %d, not %d", 1<<20, n)
	}
}

func (v *validator) checkAddresses() {
	if problem := listenProblem(v.c.Listen); problem != "" {
		v.fail("listen", "%s", problem)
	}
}

func (v *validator) checkEnums() {
	v.oneOf("dispatch.policy", v.c.Dispatch.Policy, policies)
	v.oneOf("bus.drop", v.c.Bus.Drop, drops)
	v.oneOf("websocket.slow_consumer", v.c.WebSocket.SlowConsumer, slowPolicy)
	v.oneOf("modbus.no_value", v.c.Modbus.NoValue, noValue)
	v.oneOf("log.level", v.c.Log.Level, logLevels)
	v.oneOf("log.format", v.c.Log.Format, logFormats)
}

func (v *validator) oneOf(path, value string, allowed []string) {
	if !slices.Contains(allowed, value) {
		v.fail(path, "must be one of %s, not %q", strings.Join(allowed, " | "), value)
	}
}

// checkCrossFields checks the relations between fields that are each in
// range on their own.
func (v *validator) checkCrossFields() {
	l, s := v.c.Limits, v.c.Sniff
	if s.TLSBudget < s.Budget {
		v.fail("sniff.tls_budget", "must be at least sniff.budget (%d), not %d", s.Budget, s.TLSBudget)
	}
	if l.MaxConnsPerIP > l.MaxConns {
		v.fail("limits.max_conns_per_ip", "must not exceed limits.max_conns (%d)", l.MaxConns)
	}
	if l.MaxSniffing > l.MaxConns {
		v.fail("limits.max_sniffing", "must not exceed limits.max_conns (%d)", l.MaxConns)
	}
	if l.MaxSniffingPerIP > l.MaxSniffing {
		v.fail("limits.max_sniffing_per_ip", "must not exceed limits.max_sniffing (%d)", l.MaxSniffing)
	}
	if v.servesProto("private") && l.MaxInput < v.c.Private.MaxFrame+privateHeader {
		v.fail("limits.max_input", "must hold a whole private frame: at least private.max_frame + %d (%d), not %d",
			privateHeader, v.c.Private.MaxFrame+privateHeader, l.MaxInput)
	}
	if ws := v.c.WebSocket; v.servesProto("websocket") && l.MaxInput < ws.MaxHeaderBytes {
		// The handshake is consumed only once its header block is whole.
		v.fail("limits.max_input", "must hold a whole WebSocket handshake: at least websocket.max_header_bytes (%d), not %d",
			ws.MaxHeaderBytes, l.MaxInput)
	}
	if b := v.c.Bus; b.TopicQuota > b.MaxTopics {
		v.fail("bus.topic_quota", "must not exceed bus.max_topics (%d), not %d", b.MaxTopics, b.TopicQuota)
	}
	if m := l.MemoryLimit; m != 0 && m < minMemoryLimit {
		// Below this the collector would run without pause.
		v.fail("limits.memory_limit", "must be 0 (none) or at least %d (32 MiB), not %d", minMemoryLimit, m)
	}
	if p := l.GCPercent; p != 0 && p < minGCPercent {
		v.fail("limits.gc_percent", "must be 0 (GOGC, else %d) or at least %d, not %d", DefaultGCPercent, minGCPercent, p)
	}
	if p := s.Probe; p != "" {
		if _, ok := v.c.Pools[p]; !ok {
			v.fail("sniff.probe", "no pool %q in pools", p)
		}
	}
}

// checkWebSocket checks the words of the websocket section; its numbers
// are in intRules and durationRules.
func (v *validator) checkWebSocket() {
	ws := v.c.WebSocket
	if p := ws.Path; !strings.HasPrefix(p, "/") || len(p) > maxWSPath || !validPathChars(p) {
		v.fail("websocket.path", "must be an absolute path of at most %d visible ASCII characters, such as /ws, not %q", maxWSPath, p)
	}
	if !validToken(ws.Subprotocol) {
		v.fail("websocket.subprotocol", "must be an HTTP token such as edgemux.v1, not %q", ws.Subprotocol)
	}
	if n := len(ws.AllowedOrigins); n > maxOrigins {
		v.fail("websocket.allowed_origins", "at most %d origins, not %d", maxOrigins, n)
		return
	}
	for i, o := range ws.AllowedOrigins {
		at := "websocket.allowed_origins[" + strconv.Itoa(i) + "]"
		switch {
		case o == "*" && len(ws.AllowedOrigins) > 1:
			v.fail(at, `"*" (any origin) must be the only entry`)
		case o != "*" && !validOrigin(o):
			v.fail(at, "must be an origin such as https://plant.example:8443 (scheme://host[:port], no path), or \"*\", not %q", o)
		}
	}
}

// validPathChars accepts the visible ASCII a request target may carry.
func validPathChars(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] >= 0x7f || p[i] == '?' || p[i] == '#' {
			return false
		}
	}
	return true
}

// validToken accepts an RFC 7230 token, as Sec-WebSocket-Protocol needs.
func validToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c > ' ' && c < 0x7f && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, rune(c))
		if !ok {
			return false
		}
	}
	return true
}

// validOrigin accepts what browsers send in Origin: scheme://host[:port].
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && u.Scheme != "" && u.Host != "" && u.Path == "" &&
		u.RawQuery == "" && u.Fragment == "" && u.User == nil && u.Opaque == ""
}

// servesProto reports whether some pool takes proto.
func (v *validator) servesProto(proto string) bool {
	for _, p := range v.c.Pools {
		if slices.Contains(p.Protocols, proto) {
			return true
		}
	}
	return false
}

func (v *validator) checkPools() {
	if n := len(v.c.Pools); n > maxPools {
		v.fail("pools", "at most %d pools, not %d", maxPools, n)
		return
	}
	if _, ok := v.c.Pools[quarantinePool]; !ok {
		v.fail("pools."+quarantinePool, "must be defined: unclassified and misbehaving connections go there")
	}
	names := make([]string, 0, len(v.c.Pools))
	for name := range v.c.Pools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v.checkPool("pools."+name, name, v.c.Pools[name])
	}
}

func (v *validator) checkPool(path, name string, p Pool) {
	if name == "" {
		v.fail(path, "a pool needs a name")
	}
	if p.Workers < 1 || p.Workers > 256 {
		v.fail(path+".workers", "must be between 1 and 256, not %d", p.Workers)
	}
	if d := p.IdleTimeout; d < 0 || (d > 0 && d < time.Second) || d > 24*time.Hour {
		v.fail(path+".idle_timeout", "must be 0 (never) or between 1s and 24h, not %s", shortDuration(d))
	}
	v.oneOf(path+".pattern", p.Pattern, patterns)
	if len(p.Protocols) == 0 && name != quarantinePool && !isProto(name) && !v.takesDatagrams(name) {
		v.fail(path+".protocols", "must list the protocols this pool takes (its name is not a protocol), or a udp.routes entry must name it")
	}
	for i, proto := range p.Protocols {
		at := path + ".protocols[" + strconv.Itoa(i) + "]"
		switch {
		case !isProto(proto):
			v.fail(at, "must be one of %s, not %q", strings.Join(protoNames, " | "), proto)
		case slices.Index(p.Protocols, proto) < i:
			v.fail(at, "%q is listed twice", proto)
		}
	}
}

// checkRoutes checks each route, and that none hides behind a catch-all.
func (v *validator) checkRoutes() {
	if n := len(v.c.Routes); n < 1 || n > maxRoutes {
		v.fail("routes", "must hold between 1 and %d routes, not %d", maxRoutes, n)
		if n < 1 {
			return
		}
	}
	catchAll := -1
	for i, r := range v.c.Routes[:min(len(v.c.Routes), maxRoutes)] {
		path := "routes[" + strconv.Itoa(i) + "]"
		if catchAll >= 0 {
			v.fail(path, "never matches: routes[%d] matches every connection", catchAll)
		}
		v.checkMatch(path+".match", r.Match)
		v.checkAction(path, r)
		if catchAll < 0 && r.Match == (Match{Proto: anyProto}) {
			catchAll = i
		}
	}
}

func (v *validator) checkMatch(path string, m Match) {
	v.oneOf(path+".proto", m.Proto, matchProto)
	if m.SNI != "" {
		if m.Proto != "tls" {
			v.fail(path+".sni", "only with proto tls")
		} else if !validSNIPattern(m.SNI) {
			v.fail(path+".sni", "must be a host name or *.suffix, not %q", m.SNI)
		}
	}
	if m.Source != "" {
		if _, err := netip.ParsePrefix(m.Source); err != nil {
			v.fail(path+".source", "must be a CIDR prefix such as 10.0.0.0/8, not %q", m.Source)
		}
	}
}

// checkAction checks the action and the fields that belong to it.
func (v *validator) checkAction(path string, r Route) {
	v.oneOf(path+".action", r.Action, actions)
	if r.Action != "forward" {
		if r.Backend != "" {
			v.fail(path+".backend", "only with action forward")
		}
		if r.DialTimeout != 0 {
			v.fail(path+".dial_timeout", "only with action forward")
		}
	}
	if r.Pool != "" && r.Action != "handle" {
		v.fail(path+".pool", "only with action handle")
	}
	switch r.Action {
	case "forward":
		if problem := backendProblem(r.Backend); problem != "" {
			v.fail(path+".backend", "%s", problem)
		}
		if d := r.DialTimeout; d < 100*time.Millisecond || d > time.Minute {
			v.fail(path+".dial_timeout", "must be between 100ms and 1m, not %s", shortDuration(d))
		}
	case "handle":
		v.checkHandlePool(path, r)
	case "admin":
		if r.Match.Proto != "http" {
			v.fail(path+".action", "admin serves plain HTTP only: needs match.proto http")
		}
	}
}

func (v *validator) checkHandlePool(path string, r Route) {
	if r.Pool == "" {
		v.fail(path+".pool", "a handle route for proto %q must name its pool", r.Match.Proto)
		return
	}
	pool, ok := v.c.Pools[r.Pool]
	if !ok {
		v.fail(path+".pool", "no pool %q in pools (a handle route uses the pool named after its proto unless pool is set)", r.Pool)
		return
	}
	if len(pool.Protocols) == 0 && r.Pool != quarantinePool && v.takesDatagrams(r.Pool) {
		v.fail(path+".pool", "pool %q takes no connections: it serves datagrams only (udp.routes)", r.Pool)
		return
	}
	proto := r.Match.Proto
	if proto != anyProto && len(pool.Protocols) > 0 && !slices.Contains(pool.Protocols, proto) {
		v.fail(path+".pool", "pool %q does not take proto %s (its protocols: %s)",
			r.Pool, proto, strings.Join(pool.Protocols, ", "))
	}
}

// minSocketBuffer is the smallest udp.read_buffer or write_buffer other
// than 0: below a few datagrams' worth a socket drops nearly everything.
const minSocketBuffer = 4 * kib

// checkUDP checks the udp section's buffers and routes; its numbers are in
// intRules.
func (v *validator) checkUDP() {
	u := v.c.UDP
	for _, b := range []struct {
		path string
		n    int
	}{{"udp.read_buffer", u.ReadBuffer}, {"udp.write_buffer", u.WriteBuffer}} {
		if b.n != 0 && b.n < minSocketBuffer {
			v.fail(b.path, "must be 0 (the kernel's default) or at least %d, not %d", minSocketBuffer, b.n)
		}
	}
	classes := make([]string, 0, len(u.Routes))
	for class := range u.Routes {
		classes = append(classes, class)
	}
	sort.Strings(classes)
	for _, class := range classes {
		at, pool := "udp.routes."+class, u.Routes[class]
		if !slices.Contains(datagramClasses, class) {
			v.fail(at, "must be a datagram class: %s, not %q", strings.Join(datagramClasses, " | "), class)
			continue
		}
		if pool == "" {
			continue // not routed: counted and dropped
		}
		if _, ok := v.c.Pools[pool]; !ok || pool == quarantinePool {
			v.fail(at, "must name a pool in pools other than %s, not %q (pools: %s; or %s: \"\" to drop %s datagrams)",
				quarantinePool, pool, strings.Join(v.poolNames(), ", "), class, class)
		}
	}
}

// checkRUDP checks what relates the rudp section's fields (their ranges
// are in intRules and durationRules).
func (v *validator) checkRUDP() {
	r := v.c.RUDP
	if r.MaxDatagram > v.c.UDP.MaxDatagram {
		v.fail("rudp.max_datagram", "must be at most udp.max_datagram (%d), not %d", v.c.UDP.MaxDatagram, r.MaxDatagram)
	}
	// A reliable message may take at most half the window: the rest is
	// room for what follows it. 39 bytes of a datagram are not payload:
	// the 16-byte header, a 16-byte AEAD tag, the DATA frame's 7.
	if frag := r.MaxDatagram - 39; r.MaxMessage > r.Window/2*frag {
		v.fail("rudp.max_message", "must fit half of rudp.window in fragments (%d x %d bytes), not %d", r.Window/2, frag, r.MaxMessage)
	}
	if r.SendQueue < r.MaxMessage {
		v.fail("rudp.send_queue", "must be at least rudp.max_message (%d), not %d", r.MaxMessage, r.SendQueue)
	}
	if r.KeepAlive >= r.IdleTimeout {
		v.fail("rudp.keepalive", "must be below rudp.idle_timeout (%s), not %s", shortDuration(r.IdleTimeout), shortDuration(r.KeepAlive))
	}
	if r.MinRTO > r.MaxRTO {
		v.fail("rudp.max_rto", "must be at least rudp.min_rto (%s), not %s", shortDuration(r.MinRTO), shortDuration(r.MaxRTO))
	}
}

// poolNames lists the configured pools but quarantine, sorted.
func (v *validator) poolNames() []string {
	names := make([]string, 0, len(v.c.Pools))
	for name := range v.c.Pools {
		if name != quarantinePool {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// takesDatagrams reports whether a udp.routes entry sends datagrams to
// the pool.
func (v *validator) takesDatagrams(pool string) bool {
	for _, p := range v.c.UDP.Routes {
		if p == pool {
			return true
		}
	}
	return false
}

// listenProblem checks a listen address: an IP (or nothing, for every
// interface) and a numeric port. Host names are refused: the gateway
// binds raw sockets and does not resolve names.
func listenProblem(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("must be ip:port, not %q", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Sprintf("port must be a number 0..65535, not %q", port)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Sprintf("host must be an IP address or empty (every interface), not %q", host)
		}
	}
	return ""
}

// backendProblem checks a forward backend: a host (name or IP) and a
// port 1..65535.
func backendProblem(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Sprintf("must be host:port, not %q", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Sprintf("port must be a number 1..65535, not %q", port)
	}
	return ""
}

// validSNIPattern accepts a DNS name, or "*." followed by one.
func validSNIPattern(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || len(s) > maxSNILength {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || !validLabel(label) {
			return false
		}
	}
	return true
}

func validLabel(label string) bool {
	for _, r := range label {
		ok := r == '-' || r == '_' || (r >= '0' && r <= '9') || (r|0x20 >= 'a' && r|0x20 <= 'z')
		if !ok {
			return false
		}
	}
	return true
}

// shortDuration prints "5m" rather than "5m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
