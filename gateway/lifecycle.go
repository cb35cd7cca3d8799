package gateway

import (
	"context"
	"runtime"
	"time"

	"github.com/edgemux/edgemux/registry"
)

// Run binds the port, starts the loops and workers, and blocks until ctx
// ends (then it drains with a 5 s grace), or Shutdown or Close is called.
// When it returns, every connection is closed and every fd and goroutine
// of the gateway's is released.
func (g *Gateway) Run(ctx context.Context) error {
	if !g.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer close(g.done)
	if g.closing.Load() {
		return ErrClosed
	}
	// The cluster's last values are in the cache before anyone connects.
	if err := g.startCluster(); err != nil {
		g.stop()
		g.release()
		return err
	}
	if err := g.startLoops(); err != nil {
		g.stop()
		g.release()
		return err
	}
	g.startWorkers()
	g.up.Start()
	g.poller.Start()
	g.north.Start()
	g.admin.start()
	g.wg.Add(1)
	go g.publishStats(time.Second)
	// Start-up garbage (the config's parse and checks, the metrics'
	// registration: up to 1 MB) is collected once, now, before anyone is
	// told the gateway is ready. Left to the collector's pace, that cycle
	// came during the first burst of connections and took about 0.5 MB
	// of fresh pages with it: the idle figure of 1,000 echo connections
	// read 791-807 B a connection in the traced runs where it did and
	// 168-319 B where it did not (docs/BENCHMARKS.md, round 13).
	runtime.GC()
	// Logged before Ready: whoever waits for Ready finds the line there
	// (TestReloadLog counted it as a reload's line now and then).
	g.log.Info("listening", "addr", g.addr.String(), "loops", len(g.loops),
		"workers", len(g.workers), "policy", g.cfg.Dispatch.Policy)
	close(g.ready)
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		g.drain(sctx)
	case <-g.stopped:
	}
	g.release()
	return nil
}

// Shutdown drains the gateway: it stops accepting, closes the connections
// still being classified, and has every session told in its protocol's
// words that the gateway is going (protocols.Drainer: WebSocket close
// 1001, a private GOING_AWAY ERROR, a Modbus master's request in flight
// answered). Connections then close gracefully: their output is flushed,
// their write side shut, and they are released when their peers hang up.
// Forwarded connections run on until they end. When ctx ends first, what
// is left is cut. Shutdown returns once everything is released, with
// ctx's error if the grace ran out; one log line says what was drained
// and what was cut.
func (g *Gateway) Shutdown(ctx context.Context) error {
	err := g.drain(ctx)
	if g.running.Load() {
		<-g.done
	}
	return err
}

// drain is Shutdown without waiting for Run to release everything.
func (g *Gateway) drain(ctx context.Context) error {
	if !g.closing.CompareAndSwap(false, true) {
		// Draining or closed already: wait for that, or cut what is
		// left when this caller's grace ends first.
		select {
		case <-g.stopped:
			return nil
		case <-ctx.Done():
			g.stop()
			return ctx.Err()
		}
	}
	deadline, _ := ctx.Deadline()
	g.log.Info("draining", "open", g.reg.Len(), "forwarding", g.fwd.active.Load(), "grace", time.Until(deadline).Round(time.Millisecond))
	for _, l := range g.loops {
		l.post(loopCmdStopAccept)
	}
	g.eachWorker((*worker).drain)
	admin := make(chan struct{})
	go func() {
		g.admin.shutdown(ctx)
		close(admin)
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for g.reg.Len() > 0 || g.fwd.active.Load() > 0 || !closed(admin) || !g.datagramsDrained() {
		select {
		case <-ctx.Done():
			g.stop()
			return ctx.Err()
		case <-tick.C:
		}
	}
	g.stop()
	return nil
}

// datagramsDrained reports whether every running worker's datagram
// sessions have ended since the drain began (protocols.DatagramDrainer).
// Under the inline policy the pools' workers never run: the loops' do.
func (g *Gateway) datagramsDrained() bool {
	running := g.workers
	if g.cfg.Dispatch.Policy == "inline" {
		running = nil
		for _, l := range g.loops {
			running = append(running, l.inline...)
		}
	}
	for _, w := range running {
		if w.dg != nil && !w.dg.drained.Load() {
			return false
		}
	}
	return true
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Close stops everything at once: listeners, loops, workers and every
// connection. It is idempotent; Run returns once all is released.
func (g *Gateway) Close() error {
	g.closing.Store(true)
	g.stop()
	return nil
}

func (g *Gateway) stop() {
	g.stopOnce.Do(func() {
		close(g.stopped)
		for _, l := range g.loops {
			l.post(loopCmdStop)
		}
		for _, w := range g.workers {
			w.stop()
		}
		g.admin.close()
		g.fwd.closeAll()
		g.poller.Close()
		g.up.Close()
		g.north.Close() // announces the gateway offline, syncs the stores
		g.stopCluster()
	})
}

// eachWorker calls fn for every worker that runs: the pools' goroutines,
// or under the inline policy the loops' own.
func (g *Gateway) eachWorker(fn func(*worker)) {
	for _, w := range g.workers {
		fn(w)
	}
	for _, l := range g.loops {
		for _, w := range l.inline {
			fn(w)
		}
	}
}

// release runs once the gateway has stopped: it waits for every goroutine,
// closes the connections nobody owned any more (those whose hand-over was
// still in a ring or a loop's backlog), closes the epoll instances and the
// UDP sockets (workers send from those until they end), and logs what the
// drain did.
func (g *Gateway) release() {
	g.wg.Wait()
	swept := 0
	for fd := range g.reg.Used() {
		s := g.reg.Slot(fd)
		if s.State() != registry.Free && g.closeConn(fd, s.Gen()) {
			swept++
		}
	}
	for _, l := range g.loops {
		l.closeEpoll()
	}
	for _, u := range g.udp {
		u.close()
	}
	g.releaseDatagrams()
	g.log.Info("stopped", "closed_while_draining", g.drainClosed.Load(),
		"cut", g.drainCut.Load()+int64(swept), "uptime", time.Since(g.start).Round(time.Second))
}
