// Command coapcompare measures edgemux's CoAP over UDP side by side with
// go-coap's own UDP server serving the same resource: GET requests per
// second from many peers, memory per idle peer, and memory under a flood
// of ever-new sources. run.sh drives it: each server on one core, the load
// on the other.
//
//	coapcompare serve -impl edgemux|gocoap [-addr 127.0.0.1:0]
//	coapcompare load  -addr A -peers N -duration D
//	coapcompare idle  -addr A -peers N
//	coapcompare flood -addr A -duration D -rate R
//
// Both servers answer GET /t/bench/x with the 4 bytes "21.5" (text/plain).
// It is a module of its own so that go-coap's server (and pion/dtls, which
// its options import) stay out of edgemux's.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	"github.com/plgd-dev/go-coap/v3/mux"
	coapnet "github.com/plgd-dev/go-coap/v3/net"
	"github.com/plgd-dev/go-coap/v3/options"
	"github.com/plgd-dev/go-coap/v3/udp"
	udpcoder "github.com/plgd-dev/go-coap/v3/udp/coder"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/gateway"
)

var value = []byte("21.5")

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: coapcompare serve|load|idle|flood [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	impl := fs.String("impl", "edgemux", "server: edgemux | gocoap")
	addr := fs.String("addr", "127.0.0.1:0", "server address")
	peers := fs.Int("peers", 100, "peers (one UDP socket each)")
	duration := fs.Duration("duration", 10*time.Second, "how long to load or flood")
	rate := fs.Int("rate", 5000, "flood: new sources per second")
	fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(ctx, *impl, *addr)
	case "load":
		err = load(ctx, *addr, *peers, *duration)
	case "idle":
		err = idle(ctx, *addr, *peers)
	case "flood":
		err = flood(ctx, *addr, *duration, *rate)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "coapcompare:", err)
		os.Exit(1)
	}
}

// serve runs one server until ctx ends; it prints "listening ADDR".
func serve(ctx context.Context, impl, addr string) error {
	switch impl {
	case "edgemux":
		cfg := config.Defaults()
		cfg.Listen = addr
		g, err := gateway.New(cfg, gateway.Options{})
		if err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		select {
		case <-g.Ready():
		case err := <-done:
			return err
		}
		if err := g.Bus().Publish("bench/x", value, "bench"); err != nil {
			return err
		}
		fmt.Println("listening", g.Addr())
		return <-done
	case "gocoap":
		l, err := coapnet.NewListenUDP("udp", addr)
		if err != nil {
			return err
		}
		r := mux.NewRouter()
		if err := r.Handle("/t/bench/x", mux.HandlerFunc(func(w mux.ResponseWriter, _ *mux.Message) {
			_ = w.SetResponse(codes.Content, message.TextPlain, bytes.NewReader(value))
		})); err != nil {
			return err
		}
		s := udp.NewServer(options.WithMux(r), options.WithErrors(func(error) {}))
		go func() {
			<-ctx.Done()
			s.Stop()
		}()
		fmt.Println("listening", l.LocalAddr())
		if err := s.Serve(l); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	}
	return fmt.Errorf("unknown server %q", impl)
}

// get encodes a CON GET /t/bench/x with mid into buf.
func get(buf []byte, mid uint16) []byte {
	opts := message.Options{{ID: message.URIPath, Value: []byte("t")}, {ID: message.URIPath, Value: []byte("bench")}, {ID: message.URIPath, Value: []byte("x")}}
	m := message.Message{Type: message.Confirmable, Code: codes.GET, MessageID: int32(mid), Token: []byte{byte(mid >> 8), byte(mid)}, Options: opts}
	n, err := udpcoder.DefaultCoder.Encode(m, buf[:cap(buf)])
	if err != nil {
		panic(err)
	}
	return buf[:n]
}

// answered reports whether b is the 2.05 answer to mid.
func answered(b []byte, mid uint16) bool {
	return len(b) >= 4 && b[1] == byte(codes.Content) && uint16(b[2])<<8|uint16(b[3]) == mid
}

// dial opens one peer's socket.
func dial(addr string) (*net.UDPConn, error) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	return net.DialUDP("udp", nil, raddr)
}

// load runs peers closed-loop clients, one request outstanding each (NSTART
// = 1), for d; it prints the answers per second.
func load(ctx context.Context, addr string, peers int, d time.Duration) error {
	conns := make([]*net.UDPConn, peers)
	for i := range conns {
		c, err := dial(addr)
		if err != nil {
			return err
		}
		defer c.Close()
		conns[i] = c
	}
	var answers, timeouts atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, in := make([]byte, 0, 64), make([]byte, 256)
			mid := uint16(i * 7919)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				mid++
				if _, err := c.Write(get(out, mid)); err != nil {
					return
				}
				c.SetReadDeadline(time.Now().Add(time.Second))
				for {
					n, err := c.Read(in)
					if err != nil {
						timeouts.Add(1)
						break
					}
					if answered(in[:n], mid) {
						answers.Add(1)
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	fmt.Printf("result peers=%d seconds=%.1f answers=%d rps=%.0f timeouts=%d\n", peers, elapsed, answers.Load(), float64(answers.Load())/elapsed, timeouts.Load())
	return nil
}

// idle makes peers each ask once and wait for the answer, prints "up",
// and holds the sockets until ctx ends.
func idle(ctx context.Context, addr string, peers int) error {
	conns := make([]*net.UDPConn, 0, peers)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	out, in := make([]byte, 0, 64), make([]byte, 256)
	ok := 0
	for i := range peers {
		c, err := dial(addr)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		for try := 0; try < 3; try++ {
			mid := uint16(i + try)
			c.Write(get(out, mid))
			c.SetReadDeadline(time.Now().Add(time.Second))
			if n, err := c.Read(in); err == nil && answered(in[:n], mid) {
				ok++
				break
			}
		}
	}
	fmt.Printf("up peers=%d answered=%d\n", peers, ok)
	<-ctx.Done()
	return nil
}

// flood sends GETs from a new source port (and address, 127.0.0.2 to
// 127.0.0.250 in turn) each, rate per second, for d: a spoofed-source
// flood as far as the server can tell.
func flood(ctx context.Context, addr string, d time.Duration, rate int) error {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	out := make([]byte, 0, 64)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(d)
	sent, failed := 0, 0
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; {
		<-tick.C
		for range max(1, rate/100) {
			src := &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%249))}
			c, err := net.ListenUDP("udp", src)
			if err != nil {
				failed++
				continue
			}
			if _, err := c.WriteTo(get(out, uint16(i)), raddr); err == nil {
				sent++
			}
			c.Close()
			i++
		}
	}
	fmt.Printf("result sent=%d failed=%d\n", sent, failed)
	if sent == 0 {
		return errors.New("nothing sent")
	}
	return nil
}

func init() {
	slog.SetDefault(slog.New(slog.DiscardHandler))
}
