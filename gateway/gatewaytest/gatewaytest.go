// Package gatewaytest starts real gateways for the tests of other
// packages (the command, the load generator, the first-device script):
// the built-in defaults on a free loopback port, closed when the test
// ends. The gateway package's own tests cannot import it (it imports the
// gateway) and keep their own helper.
package gatewaytest

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/gateway"
)

// Defaults is the built-in default config on 127.0.0.1, port 0 (the
// kernel picks one, for TCP and UDP alike), with one event loop.
func Defaults(t testing.TB) config.Config {
	t.Helper()
	cfg, err := config.Parse(config.DefaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.Loops = 1
	return cfg
}

// Start runs a gateway with cfg until the test ends, and returns it once
// it listens (its address is g.Addr()). A gateway that fails to start or
// to stop fails the test.
func Start(t testing.TB, cfg config.Config) *gateway.Gateway {
	t.Helper()
	g, err := gateway.New(cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	select {
	case <-g.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		g.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return g
}

// Buffer is a bytes.Buffer that a running command or process writes
// while the test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
