// Command edgemux runs the multi-protocol edge gateway.
//
//	edgemux [run] [-c FILE]   run (without -c: the embedded default config)
//	edgemux check -c FILE     validate a config file: ok and any warnings,
//	                          exit 0; or every error, exit 1
//	edgemux version           print the version
//
// SIGTERM and SIGINT drain and exit; SIGHUP reloads routes and limits from
// the config file without dropping live connections.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/gateway"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("edgemux "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("c", "", "config file (YAML); default: the embedded default config")
	drain := fs.Duration("drain", 10*time.Second, "how long SIGTERM waits for connections to finish")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "edgemux", version)
		return 0
	case "check":
		if *file == "" {
			fmt.Fprintln(stderr, "edgemux check: -c FILE is required")
			return 2
		}
		cfg, err := config.Load(*file)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintln(stdout, *file+": ok")
		for _, w := range cfg.Warnings() {
			fmt.Fprintln(stdout, "warning:", w)
		}
		return 0
	case "run":
		return serve(*file, *drain, stderr)
	}
	fmt.Fprintf(stderr, "edgemux: unknown command %q (run | check | version)\n", cmd)
	return 2
}

func load(file string) (config.Config, error) {
	if file == "" {
		return config.Parse(config.DefaultYAML)
	}
	return config.Load(file)
}

func serve(file string, drain time.Duration, stderr io.Writer) int {
	cfg, err := load(file)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	proc, log := newProcess(cfg.Log, stderr)
	proc.apply(cfg, log)
	logWarnings(cfg, log)
	g, err := gateway.New(cfg, gateway.Options{Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			return 0
		case s := <-sigs:
			if s == syscall.SIGHUP {
				reload(g, file, proc, log)
				continue
			}
			log.Info("shutting down", "signal", s.String())
			ctx, cancel := context.WithTimeout(context.Background(), drain)
			g.Shutdown(ctx)
			cancel()
		}
	}
}

// reload applies the file again. A file that does not load (or validate)
// changes nothing; one that does is applied as far as the gateway can
// without a restart, which it reports, and the process settings always.
func reload(g *gateway.Gateway, file string, proc *process, log *slog.Logger) {
	cfg, err := load(file)
	if err != nil {
		log.Warn("reload", "err", errors.Unwrap(err), "detail", err.Error())
		return
	}
	logWarnings(cfg, log)
	if err := g.Reload(cfg); err != nil {
		log.Warn("reload", "err", errors.Unwrap(err), "detail", err.Error())
	}
	proc.apply(cfg, log)
}

// logWarnings logs what `edgemux check` warns about: the gateway starts
// (or reloads) anyway.
func logWarnings(cfg config.Config, log *slog.Logger) {
	for _, w := range cfg.Warnings() {
		log.Warn("config", "key", w.Path, "line", w.Line, "warning", w.Problem)
	}
}
