package gateway

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/edgemux/edgemux/config"
)

// Reload validates cfg and swaps in its routes, limits, sniff settings and
// its websocket and modbus sections (those two only when they changed).
// Live connections are untouched (open WebSocket sessions take the new
// settings from their next call, Modbus masters from their next request).
// Every other key that differs from what the gateway started with needs
// a restart: the error is then a *RestartError naming those keys, and the
// rest of cfg is applied. Any other error means nothing was applied. The
// log section and limits.memory_limit are the process's, applied by the
// binary. Of the admin section, all but enabled and idle_timeout reload
// (access.go).
func (g *Gateway) Reload(cfg config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	rt, err := compileRuntime(cfg)
	if err != nil {
		return err
	}
	acc, err := g.admin.compile(cfg.Admin)
	if err != nil {
		return err
	}
	for _, r := range rt.routes {
		if r.action == actionHandle && g.byPool[r.pool] == nil {
			return fmt.Errorf("gateway: reload: route to pool %q, which is not running (a new pool needs a restart)", r.pool)
		}
	}
	if err := g.bus.Reserve(servedOwner, servedTopics(cfg)); err != nil {
		return err
	}
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	g.rt.Store(rt)
	if !reflect.DeepEqual(cfg.WebSocket, g.applied.WebSocket) {
		g.ws.Reload(cfg.WebSocket)
	}
	if !reflect.DeepEqual(cfg.Modbus, g.applied.Modbus) {
		g.mb.Reload(cfg.Modbus)
	}
	g.admin.apply(cfg.Admin, acc)
	g.applied = cfg
	if keys := restartKeys(g.cfg, cfg); len(keys) > 0 {
		return &RestartError{Keys: keys}
	}
	return nil
}

// restartOnly are the keys (and sections) Reload cannot apply to a
// running gateway.
var restartOnly = []string{
	"listen", "loops", "pin_cpus", "pools", "dispatch", "private", "quarantine", "bus",
	"admin.enabled", "admin.idle_timeout", "admin.stage_sample", "udp", "rudp", "coap",
	"data_dir", "north", // the sinks hold connections and queues on disk
	"cluster",
}

// restartKeys are the keys of cfg that differ from running and need a
// restart.
func restartKeys(running, cfg config.Config) []string {
	var keys []string
	for _, k := range config.Changed(running, cfg) {
		for _, p := range restartOnly {
			if k == p || strings.HasPrefix(k, p+".") {
				keys = append(keys, k)
				break
			}
		}
	}
	return keys
}

// RestartError is Reload's answer when it applied a config but some of
// its keys need a restart to take effect; errors.Is(err, ErrNeedsRestart)
// holds for it.
type RestartError struct {
	Keys []string // dotted paths, as config.Changed names them
}

func (e *RestartError) Error() string {
	return fmt.Sprintf("%v: %s", errRestartCfg, strings.Join(e.Keys, ", "))
}

func (e *RestartError) Unwrap() error { return errRestartCfg }

// ErrNeedsRestart is what a *RestartError wraps.
var ErrNeedsRestart = errRestartCfg
