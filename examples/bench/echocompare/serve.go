package main

// The three peers, each the plainest echo its library offers: what a
// connection sends comes back as it is. They know nothing of frames; the
// load generator sends private-protocol frames to every server, so the
// bytes on the wire are the same as edgemux's.

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/lesismal/nbio"
	"github.com/panjf2000/gnet/v2"
)

// echoBuf is the Go net server's read buffer per connection: large enough
// for a 1 KiB request in one read, small enough not to dominate idle
// memory (the goroutine's stack does that anyway).
const echoBuf = 2048

func serveMain(kind string, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:5081", "listen address")
	pollers := fs.Int("pollers", 0, "nbio: poller goroutines (0: nbio's default, a quarter of the cores and at least one)")
	fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ready := func(a net.Addr) { fmt.Fprintf(os.Stderr, "%s listening on %s\n", kind, a) }
	switch kind {
	case "gonet":
		return serveGoNet(ctx, *addr, ready)
	case "gnet":
		return serveGnet(ctx, *addr, ready)
	case "nbio":
		return serveNbio(ctx, *addr, *pollers, ready)
	}
	return fmt.Errorf("unknown server %q (gonet | gnet | nbio)", kind)
}

// serveGoNet: a goroutine per connection, read then write.
func serveGoNet(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ready(ln.Addr())
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			buf := make([]byte, echoBuf)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// gnetEcho writes back what arrived, from gnet's own input buffer.
type gnetEcho struct {
	gnet.BuiltinEventEngine
	ready func(net.Addr)
	addr  string
}

func (e *gnetEcho) OnBoot(eng gnet.Engine) gnet.Action {
	a, _ := net.ResolveTCPAddr("tcp", e.addr)
	e.ready(a)
	return gnet.None
}

func (e *gnetEcho) OnTraffic(c gnet.Conn) gnet.Action {
	buf, _ := c.Next(-1)
	c.Write(buf)
	return gnet.None
}

// serveGnet runs gnet with one event loop per core (its multicore mode).
// SO_REUSEADDR, which gnet leaves off by default, is on as it is for Go's
// listeners and edgemux's: without it a bind a second after the last gnet
// stopped can fail on that one's TIME_WAIT connections (one run of round 15
// was lost so). It changes the bind only, not how connections are served.
func serveGnet(ctx context.Context, addr string, ready func(net.Addr)) error {
	e := &gnetEcho{ready: ready, addr: addr}
	errc := make(chan error, 1)
	opts := []gnet.Option{gnet.WithMulticore(true), gnet.WithReusePort(false), gnet.WithReuseAddr(true)}
	go func() { errc <- gnet.Run(e, "tcp://"+addr, opts...) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return gnet.Stop(context.Background(), "tcp://"+addr)
	}
}

// serveNbio runs nbio's engine with its defaults unless pollers is set.
// nbio's default is a poller per four cores and at least one: on this
// two-core box, one goroutine waits in epoll_wait and runs every OnData.
func serveNbio(ctx context.Context, addr string, pollers int, ready func(net.Addr)) error {
	eng := nbio.NewEngine(nbio.Config{Network: "tcp", Addrs: []string{addr}, NPoller: pollers})
	eng.OnData(func(c *nbio.Conn, data []byte) { c.Write(data) })
	if err := eng.Start(); err != nil {
		return err
	}
	a, _ := net.ResolveTCPAddr("tcp", addr)
	ready(a)
	<-ctx.Done()
	eng.Stop()
	return nil
}
