package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/gateway/dashboard"
	"github.com/edgemux/edgemux/registry"
)

// detached is a connection taken out of epoll for a goroutine-based
// handler: the admin HTTP server or a forwarder. There are few of these,
// so a goroutine each is fine.
type detached struct {
	conn net.Conn
	peer netip.AddrPort
}

// admin serves the admin endpoints with net/http over connections the
// loops hand it; it has no listening socket of its own. Who may use which
// endpoint is access.go's business, how many connections each source may
// hold is adminConns' (access_conns.go).
type admin struct {
	g     *Gateway
	srv   *http.Server
	ln    *handoffListener
	conns *adminConns
	acc   atomic.Pointer[access]
	pprof atomic.Bool
	key   []byte // signs operator cookies; drawn once, so reloads keep them
}

func newAdmin(g *Gateway) (*admin, error) {
	cfg := g.cfg.Admin
	a := &admin{g: g, ln: newHandoffListener(), key: make([]byte, 32)}
	rand.Read(a.key) // never fails (crypto/rand, Go 1.24+)
	acc, err := compileAccess(cfg, a.key)
	if err != nil {
		return nil, err
	}
	a.conns = newAdminConns(g, cfg.MaxConns, cfg.MaxConnsPerIP)
	a.apply(cfg, acc)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/registry", a.registry)
	mux.HandleFunc("GET /api/stats", a.stats)
	mux.HandleFunc("POST /api/login", a.login)
	mux.Handle("/", dashboard.Handler())
	// Go's profiler, for operators chasing memory or CPU on a live box;
	// off unless admin.pprof says so (a CPU profile or a goroutine dump is
	// a lot to hand out).
	mux.Handle("GET /debug/pprof/", a.pprofOnly(pprof.Index))
	mux.Handle("GET /debug/pprof/profile", a.pprofOnly(pprof.Profile))
	mux.Handle("GET /debug/pprof/symbol", a.pprofOnly(pprof.Symbol))
	mux.Handle("GET /debug/pprof/trace", a.pprofOnly(pprof.Trace))
	a.srv = &http.Server{
		Handler:           a.guard(mux),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ConnState:         a.conns.state,
	}
	// The websocket handler asks the same operator rules which sessions
	// may see the gateway's own "$" topics.
	g.ws.SetOperatorCheck(a.operatorHandshake)
	return a, nil
}

// compile reads cfg's access rules (token files included) without
// applying them, so a reload that fails changes nothing.
func (a *admin) compile(cfg config.Admin) (*access, error) { return compileAccess(cfg, a.key) }

// apply swaps in rules compiled from cfg, with its caps and pprof switch.
// WebSocket sessions the old operator rules admitted lose that standing
// when the operator rules changed.
func (a *admin) apply(cfg config.Admin, acc *access) {
	old := a.acc.Swap(acc)
	a.pprof.Store(cfg.PProf)
	a.conns.setLimits(cfg.MaxConns, cfg.MaxConnsPerIP)
	if old != nil && !old.sameOperator(acc) {
		a.g.ws.SetOperatorCheck(a.operatorHandshake)
	}
}

func (a *admin) start() {
	if !a.g.cfg.Admin.Enabled {
		return
	}
	a.g.wg.Add(1)
	go func() {
		defer a.g.wg.Done()
		a.srv.Serve(a.ln)
	}()
}

// serve takes a detached connection: it joins the admin server, or is
// answered 429 or 503 (or 404 when admin is off) and closed.
func (a *admin) serve(d *detached) {
	if !a.g.cfg.Admin.Enabled {
		a.conns.refuse(d.conn, http.StatusNotFound, "admin_disabled", "admin HTTP is off on this gateway (admin.enabled)")
		return
	}
	if !a.conns.admit(d.conn, d.peer.Addr()) {
		return // answered
	}
	if !a.ln.push(d.conn) {
		a.conns.forget(d.conn)
		a.conns.refuse(d.conn, http.StatusServiceUnavailable, "admin_busy", "the admin server is not keeping up; try again")
	}
}

func (a *admin) shutdown(ctx context.Context) { a.srv.Shutdown(ctx); a.conns.close() }

func (a *admin) close() {
	a.srv.Close()
	a.ln.Close()
	a.conns.close()
	for { // connections handed over but never accepted
		select {
		case c := <-a.ln.ch:
			c.Close()
		default:
			return
		}
	}
}

// guard is the outermost handler: access groups first, then the
// endpoints.
func (a *admin) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			// RFC 9112 section 6.1: a request with both Transfer-Encoding
			// and Content-Length may be a smuggling attempt, and the
			// connection must close after the response. net/http has
			// dropped the Content-Length by now, so close after any
			// Transfer-Encoding: no admin endpoint takes a body.
			w.Header().Set("Connection", "close")
		}
		peer, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			http.Error(w, "edgemux: no peer address", http.StatusInternalServerError)
			return
		}
		g, acc := groupOf(r.URL.Path), a.acc.Load()
		switch {
		case !acc.sourceAllowed(g, peer.Addr()):
			a.deny(w, http.StatusForbidden, "admin_forbidden",
				fmt.Sprintf("edgemux: %s endpoints are not open to %s (admin.%s.allow)", g, peer.Addr().Unmap(), g))
		case g == groupOperator && dashboardPage(r):
			next.ServeHTTP(w, r) // the page holds no data: it asks for the token when its API calls get 401
		case !acc.credentialed(g, r.Header, time.Now()):
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgemux `+g.String()+`"`)
			a.deny(w, http.StatusUnauthorized, "admin_unauthorized",
				fmt.Sprintf("edgemux: %s endpoints need the bearer token (admin.%s.token_file)", g, g))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// dashboardPage: the dashboard's static page itself, not its data.
func dashboardPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/" || r.URL.Path == "/index.html")
}

func (a *admin) deny(w http.ResponseWriter, status int, reason, msg string) {
	a.g.metrics.refused.WithLabelValues(reason).Inc()
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, msg, status)
}

// login is reached only with the operator's credentials (guard checked
// them); it gives the browser the cookie that stands for the token, so
// the dashboard's later requests and its WebSocket carry it.
func (a *admin) login(w http.ResponseWriter, _ *http.Request) {
	if c := a.acc.Load().cookie(time.Now()); c != nil {
		http.SetCookie(w, c)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// operatorHandshake is the websocket handler's operator check: the
// handshake must pass the operator group as an admin request would.
func (a *admin) operatorHandshake(peer netip.AddrPort, h http.Header) bool {
	return a.acc.Load().admits(groupOperator, peer.Addr(), h, time.Now())
}

// pprofOnly serves h while admin.pprof is on, and 404 otherwise.
func (a *admin) pprofOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.pprof.Load() {
			http.Error(w, "404 page not found (the profiler is off: admin.pprof)", http.StatusNotFound)
			return
		}
		h(w, r)
	})
}

func (a *admin) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	status := "ok"
	if a.g.closing.Load() {
		status = "draining"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(map[string]any{
		"status":      status,
		"connections": a.g.reg.Len(),
		"uptime_s":    int(time.Since(a.g.start).Seconds()),
	})
}

// registry shows the live slots, at most ?max=N (default 1000, cap 20000).
func (a *admin) registry(w http.ResponseWriter, r *http.Request) {
	max := 1000
	if v := r.URL.Query().Get("max"); v != "" {
		if n, err := parsePositive(v); err == nil {
			max = min(n, 20000)
		}
	}
	views := a.g.reg.Snapshot(make([]registry.View, 0, 64), max)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"open":  a.g.reg.Len(),
		"stale": a.g.reg.Stale(),
		"slots": views,
		// Sessions over the reliable UDP core have no fd and no slot.
		"rudp": map[string]any{
			"open":     a.g.streams.Stats().Open,
			"sessions": a.g.streams.Sessions(max),
		},
	})
}

func parsePositive(s string) (int, error) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' || n > 1<<24 {
			return 0, errors.New("not a number")
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// handoffListener is a net.Listener fed by the loops.
type handoffListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newHandoffListener() *handoffListener {
	return &handoffListener{ch: make(chan net.Conn, 64), done: make(chan struct{})}
}

func (l *handoffListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	default:
		return false // the admin server is not keeping up: refuse
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return &net.TCPAddr{} }
