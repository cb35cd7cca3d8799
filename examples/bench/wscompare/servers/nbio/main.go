// Command nbio is the event-loop peer of the WebSocket comparison:
// lesismal/nbio's nbhttp Engine and websocket Upgrader serving the pubsub
// JSON protocol on /ws and its heap (after a forced GC) on /debug/mem.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/nbiosrv"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5073", "listen address (host:port)")
	flag.Parse()
	srv, err := nbiosrv.Start(nbiosrv.Config{Addr: *addr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "nbio:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "nbio: listening on %s\n", srv.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	srv.Stop()
}
