package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/gateway"
)

// load reads file, or the built-in defaults when file is "".
func load(file string) (config.Config, error) {
	if file == "" {
		return config.Parse(config.DefaultYAML)
	}
	return config.Load(file)
}

// server is a running gateway with what the binary keeps beside it: the
// config file, the process settings, and the config last applied, which
// a reload compares the file with to name what changed.
type server struct {
	file string
	g    *gateway.Gateway
	proc *process
	log  *slog.Logger
	cur  config.Config
}

// newServer loads file and builds the gateway (not yet running).
func newServer(file string, logTo io.Writer) (*server, error) {
	cfg, err := load(file)
	if err != nil {
		return nil, err
	}
	proc, log := newProcess(cfg.Log, logTo)
	proc.apply(cfg, log)
	logWarnings(cfg, log)
	g, err := gateway.New(cfg, gateway.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return &server{file: file, g: g, proc: proc, log: log, cur: cfg}, nil
}

func serve(file string, drain time.Duration, stderr io.Writer) int {
	s, err := newServer(file, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan error, 1)
	go func() { done <- s.g.Run(context.Background()) }()
	ready := s.g.Ready()
	for {
		select {
		case <-ready:
			s.started()
			s.releaseStartupPages()
			ready = nil
		case err := <-done:
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			return 0
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.reload()
				s.releaseStartupPages()
				continue
			}
			s.log.Info("shutting down", "signal", sig.String())
			ctx, cancel := context.WithTimeout(context.Background(), drain)
			s.g.Shutdown(ctx)
			cancel()
		}
	}
}

// started says what is served where, once the gateway listens.
func (s *server) started() {
	cfgFrom := s.file
	if cfgFrom == "" {
		cfgFrom = "built-in defaults"
	}
	base := "http://" + urlHost(s.g.Addr())
	dashboard, metrics := base+"/", base+"/metrics"
	if !s.cur.Admin.Enabled {
		dashboard, metrics = "off (admin.enabled)", "off (admin.enabled)"
	}
	s.log.Info("edgemux started", "version", readBuildInfo().version, "config", cfgFrom,
		"listen", s.g.Addr().String(), "routes", routeList(s.cur.Routes),
		"dashboard", dashboard, "metrics", metrics)
}

// releaseStartupPages unmaps the executable pages start-up or a reload
// left mapped (pages.go). Failing costs only memory, so it is a warning.
func (s *server) releaseStartupPages() {
	n, err := releaseStartupPages()
	if err != nil {
		s.log.Warn("start-up pages not released", "err", err.Error())
		return
	}
	s.log.Debug("start-up pages released", "bytes", n)
}

// urlHost is the address a browser on another machine can use: the
// host's name when the gateway listens on every interface.
func urlHost(a netip.AddrPort) string {
	if !a.Addr().IsUnspecified() {
		return a.String()
	}
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	return net.JoinHostPort(host, fmt.Sprint(a.Port()))
}

// routeList is the routes as "protocol->target", comma-separated in
// their order: the pool that handles, the backend forwarded to, admin,
// or quarantine.
func routeList(routes []config.Route) string {
	parts := make([]string, 0, len(routes))
	for _, r := range routes {
		from := r.Match.Proto
		if r.Match.SNI != "" {
			from += "(sni " + r.Match.SNI + ")"
		}
		if r.Match.Source != "" {
			from += "(from " + r.Match.Source + ")"
		}
		to := r.Action
		switch r.Action {
		case "handle":
			to = r.Pool
			if to == "" {
				to = r.Match.Proto
			}
		case "forward":
			to = r.Backend
		}
		parts = append(parts, from+"->"+to)
	}
	return strings.Join(parts, ",")
}

// reload applies the file again, and logs one line: what changed and
// that it was applied (with the keys that wait for a restart), or why it
// was not and that the old config stays.
func (s *server) reload() {
	cfg, err := load(s.file)
	if err == nil {
		err = s.g.Reload(cfg)
	}
	var restart *gateway.RestartError
	if err != nil && !errors.As(err, &restart) {
		s.log.Error("reload failed, old config stays", "err", err.Error())
		return
	}
	logWarnings(cfg, s.log)
	changed := config.Changed(s.cur, cfg)
	s.cur = cfg
	var later []string
	if restart != nil {
		later = restart.Keys
	}
	later = append(later, s.proc.apply(cfg, s.log)...)
	if len(later) > 0 {
		s.log.Warn("reload ok, some changes need a restart", "changed", keyList(changed), "needs_restart", keyList(later))
		return
	}
	s.log.Info("reload ok", "changed", keyList(changed))
}

// logWarnings logs what `edgemux check` warns about: the gateway starts
// (or reloads) anyway.
func logWarnings(cfg config.Config, log *slog.Logger) {
	for _, w := range cfg.Warnings() {
		log.Warn("config", "key", w.Path, "line", w.Line, "warning", w.Problem)
	}
}

// keyList prints keys as [a,b]: one token in a text log line.
func keyList(keys []string) string { return "[" + strings.Join(keys, ",") + "]" }
