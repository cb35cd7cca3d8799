package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

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

// admin serves /healthz, /metrics and /debug/registry with net/http over
// connections the loops hand it; it has no listening socket of its own.
type admin struct {
	g      *Gateway
	srv    *http.Server
	ln     *handoffListener
	active atomic.Int64
}

func newAdmin(g *Gateway) *admin {
	a := &admin{g: g, ln: newHandoffListener()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/registry", a.registry)
	mux.HandleFunc("GET /api/stats", a.stats)
	mux.Handle("/", dashboard.Handler())
	// Go's profiler, for operators chasing memory or CPU on a live box.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	a.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				a.active.Add(-1)
			}
		},
	}
	return a
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

// serve takes a detached connection, or closes it when admin is off or
// full.
func (a *admin) serve(d *detached) {
	if !a.g.cfg.Admin.Enabled || a.active.Load() >= int64(a.g.cfg.Admin.MaxConns) {
		a.g.metrics.refused.WithLabelValues("admin_max_conns").Inc()
		d.conn.Close()
		return
	}
	a.active.Add(1)
	if !a.ln.push(d.conn) {
		a.active.Add(-1)
		d.conn.Close()
	}
}

func (a *admin) shutdown(ctx context.Context) { a.srv.Shutdown(ctx) }
func (a *admin) close()                       { a.srv.Close(); a.ln.Close() }

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
