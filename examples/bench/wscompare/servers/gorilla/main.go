// Command gorilla is the goroutine-per-connection peer of the WebSocket
// comparison: net/http and gorilla/websocket serving the pubsub JSON
// protocol on /ws and its heap (after a forced GC) on /debug/mem.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/gorillasrv"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5072", "listen address (host:port)")
	writer := flag.String("writer", gorillasrv.WriterGoroutine, "write model: goroutine (chat example) | mutex")
	flag.Parse()
	if err := run(*addr, *writer); err != nil {
		fmt.Fprintln(os.Stderr, "gorilla:", err)
		os.Exit(1)
	}
}

func run(addr, writer string) error {
	srv, err := gorillasrv.New(gorillasrv.Config{Writer: writer})
	if err != nil {
		return err
	}
	hs := &http.Server{Addr: addr, Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		hs.Close() // hijacked WebSocket connections end with the process
	}()
	fmt.Fprintf(os.Stderr, "gorilla: listening on %s, writer %s\n", addr, writer)
	if err := hs.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
