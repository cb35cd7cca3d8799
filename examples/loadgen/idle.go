package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"
)

// runIdle opens the connections, reports when they are up, holds them and
// reports how many the gateway closed meanwhile. No goroutine per
// connection: the connections sit in a slice and are checked at the end
// with a non-blocking peek.
func runIdle(ctx context.Context, o options, out io.Writer) error {
	start := time.Now()
	conns, failed, firstErr := dialAll(ctx, o.Conns, o.Parallel, func(i int) (net.Conn, error) {
		return dialDevice(ctx, o.Addr, sourceAddr(i, o.Sources), deviceID(o.Prefix, "idle", i), o.Timeout)
	})
	defer closeAll(conns)
	up := countOpen(conns)
	fmt.Fprintf(out, "up mode=idle conns=%d open=%d failed=%d sources=%d elapsed=%.1fs\n",
		o.Conns, up, failed, o.Sources, time.Since(start).Seconds())
	if firstErr != nil {
		fmt.Fprintf(out, "first-error %q\n", firstErr.Error())
	}
	held := hold(ctx, o.Hold)
	closed := 0
	for _, c := range conns {
		if c != nil && connState(c) {
			closed++
		}
	}
	fmt.Fprintf(out, "result mode=idle conns=%d open=%d failed=%d closed_by_peer=%d alive=%d held=%.1fs\n",
		o.Conns, up, failed, closed, up-closed, held.Seconds())
	return nil
}

// hold waits for d or for ctx (SIGTERM) and returns how long it waited.
func hold(ctx context.Context, d time.Duration) time.Duration {
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return time.Since(start)
}

// countOpen counts the connections that are up; the rest failed or were
// never tried because ctx ended during dialing.
func countOpen(conns []net.Conn) int {
	n := 0
	for _, c := range conns {
		if c != nil {
			n++
		}
	}
	return n
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}
