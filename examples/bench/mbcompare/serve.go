package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/examples/mbsim"
	"github.com/edgemux/edgemux/gateway"
)

// serverTypes is the register map's cycle of types: 30 tags in 48
// registers from address 0, each a bus topic mb/s/<i>.
var serverTypes = []string{"uint16", "int32", "float32", "uint16", "int16", "float32", "uint32"}

func width(typ string) int {
	if typ == "int32" || typ == "uint32" || typ == "float32" {
		return 2
	}
	return 1
}

// serverYAML is the gateway's register map: 30 holding-register tags.
func serverYAML() []byte {
	var b bytes.Buffer
	b.WriteString("listen: 127.0.0.1:0\nlog: {level: warn}\nmodbus:\n  tags:\n")
	addr := 0
	for i := range 30 {
		typ := serverTypes[i%len(serverTypes)]
		fmt.Fprintf(&b, "    - {topic: mb/s/%d, table: holding, address: %d, type: %s, scale: 1}\n", i, addr, typ)
		addr += width(typ)
	}
	return b.Bytes()
}

// serve runs one Modbus TCP server until ctx ends and prints
// "listening ADDR": edgemux's register map over bus tags that a goroutine
// republishes every 10 ms (live values, as devices would publish them),
// or the simulator's plain goroutine-per-connection server (mbsim), whose
// registers are encoded afresh on every read.
func serve(ctx context.Context, impl, cpuProfile string) error {
	switch impl {
	case "mbsim":
		s, err := mbsim.Start(mbsim.Config{Devices: 1, Net: "127.2"})
		if err != nil {
			return err
		}
		fmt.Println("listening", s.Addrs()[0])
		<-ctx.Done()
		s.Close()
		return nil
	case "edgemux":
	default:
		return fmt.Errorf("unknown server %q", impl)
	}
	cfg, err := config.Parse(serverYAML())
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
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
	publish := func(gen int) error {
		var v []byte
		for i := range 30 {
			v = strconv.AppendFloat(v[:0], mbsim.Expected(i%len(mbsim.Tags), uint64(gen))/4, 'f', -1, 64)
			if serverTypes[i%len(serverTypes)] != "float32" {
				v = strconv.AppendInt(v[:0], int64(gen+i)%30000, 10)
			}
			if err := g.Bus().Publish("mb/s/"+strconv.Itoa(i), v, "bench"); err != nil {
				return err
			}
		}
		return nil
	}
	if err := publish(1); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for gen := 2; ; gen++ {
			select {
			case <-t.C:
				publish(gen)
			case <-ctx.Done():
				return
			}
		}
	}()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	fmt.Println("listening", g.Addr())
	return <-done
}

// stdout is where the modes print their lines (a test reads them).
var stdout io.Writer = os.Stdout

// masters runs n closed-loop Modbus TCP masters (a raw loop, one request
// in flight each: FC 3, regs registers from 0) against addr; after the
// warm-up it prints "window start", then the result: requests answered
// per second, latency percentiles, errors.
func masters(ctx context.Context, addr string, n, regs int, w window) error {
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		conns[i] = c
	}
	var measuring, stop atomic.Bool
	var errs atomic.Uint64
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat[i] = master(c, regs, &measuring, &stop, &errs)
		}()
	}
	select {
	case <-time.After(w.warmup):
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "window start")
	measuring.Store(true)
	start := time.Now()
	select {
	case <-time.After(w.length):
	case <-ctx.Done():
	}
	measuring.Store(false)
	secs := time.Since(start).Seconds()
	stop.Store(true)
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000
	}
	fmt.Fprintf(stdout, "result masters=%d regs=%d answers=%d seconds=%.2f rps=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f errors=%d\n",
		n, regs, len(all), secs, float64(len(all))/secs, pct(0.50), pct(0.99), pct(1), errs.Load())
	return nil
}

// master is one master's loop: it records the latency of each answer
// while measuring; a wrong answer or a broken connection ends it.
func master(c net.Conn, regs int, measuring, stop *atomic.Bool, errs *atomic.Uint64) []time.Duration {
	var lat []time.Duration
	req := []byte{0, 0, 0, 0, 0, 6, 1, 3, 0, 0, byte(regs >> 8), byte(regs)}
	resp := make([]byte, 9+2*regs)
	for tid := uint16(1); !stop.Load(); tid++ {
		binary.BigEndian.PutUint16(req, tid)
		t0 := time.Now()
		c.SetDeadline(t0.Add(5 * time.Second))
		if _, err := c.Write(req); err != nil {
			errs.Add(1)
			return lat
		}
		// The header and function first: an exception is 9 bytes.
		if _, err := io.ReadFull(c, resp[:9]); err != nil || resp[7] != 3 {
			errs.Add(1)
			return lat
		}
		if _, err := io.ReadFull(c, resp[9:]); err != nil || binary.BigEndian.Uint16(resp) != tid || int(resp[8]) != 2*regs {
			errs.Add(1)
			return lat
		}
		if measuring.Load() {
			lat = append(lat, time.Since(t0))
		}
	}
	return lat
}
