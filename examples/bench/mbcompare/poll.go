package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goburrow/modbus"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/examples/mbsim"
	"github.com/edgemux/edgemux/gateway"
	"github.com/edgemux/edgemux/route/bus"
)

// window is one measurement: what a poller did between the end of its
// warm-up and the end of the run, and its own CPU and peak RSS.
type window struct {
	warmup, length time.Duration
}

// measure waits out the warm-up, prints "window start", waits the
// window, and prints the result line: the tags counted by count over
// the window, its length, this process's CPU seconds in it, its peak RSS.
func (w window) measure(ctx context.Context, impl string, count func() (tags, bad uint64)) error {
	select {
	case <-time.After(w.warmup):
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Println("window start")
	t0, b0 := count()
	cpu0, _ := selfUsage()
	start := time.Now()
	select {
	case <-time.After(w.length):
	case <-ctx.Done():
		return ctx.Err()
	}
	t1, b1 := count()
	cpu1, hwm := selfUsage()
	secs := time.Since(start).Seconds()
	rss, _ := statusKB(os.Getpid(), "VmRSS")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("result impl=%s tags=%d bad=%d seconds=%.2f cpu_s=%.2f rss_peak_kb=%d rss_kb=%d heap_inuse_kb=%d goroutines=%d\n",
		impl, t1-t0, b1-b0, secs, cpu1-cpu0, hwm, rss, ms.HeapInuse>>10, runtime.NumGoroutine())
	return nil
}

// pollYAML is the gateway configuration that polls every device: a tcp
// line each, the layout's 30 tags on topic m/<device>/<address>,
// published every poll (the values change every read anyway). Flow style
// keeps 500 devices x 30 tags under the configuration's 1 MiB (in block
// style they take 1.2 MB).
func pollYAML(addrs []string, interval time.Duration) []byte {
	var b bytes.Buffer
	b.WriteString("listen: 127.0.0.1:0\nlog: {level: warn}\nmodbus:\n  upstream:\n    lines:\n")
	for i, a := range addrs {
		fmt.Fprintf(&b, "      - {name: l%d, kind: tcp, address: '%s'}\n", i, a)
	}
	b.WriteString("    devices:\n")
	for i := range addrs {
		fmt.Fprintf(&b, "      - {name: d%d, line: l%d, unit_id: 1, timeout: 2s, poll: {interval: %v, on_change: false, tags: [\n", i, i, interval)
		for _, t := range mbsim.Tags {
			fmt.Fprintf(&b, "{topic: m/%d/%d, table: holding, address: %d, type: %s},", i, t.Address, t.Address, t.Type)
		}
		b.WriteString("]}}\n")
	}
	return b.Bytes()
}

// pollEdgemux runs the gateway from pollYAML with a bus subscriber on
// m/# that counts every published tag (and those not of good quality).
func pollEdgemux(ctx context.Context, addrs []string, interval time.Duration, w window, cpuProfile, memProfile string) error {
	y := pollYAML(addrs, interval)
	cfg, err := config.Parse(y)
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	select {
	case <-g.Ready():
	case err := <-done:
		return err
	}
	var tags, bad atomic.Uint64
	if err := subscribeCount(ctx, g.Bus(), "m/#", &tags, &bad); err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	hwm, _ := statusKB(os.Getpid(), "VmHWM")
	fmt.Fprintf(os.Stderr, "edgemux: %d devices, configuration %d bytes, peak RSS %d MB when started\n", len(addrs), len(y), hwm>>10)
	err = w.measure(ctx, "edgemux", func() (uint64, uint64) { return tags.Load(), bad.Load() })
	if memProfile != "" {
		if f, ferr := os.Create(memProfile); ferr == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	cancel()
	<-done
	return err
}

// subscribeCount counts what a subscriber on filter receives, on a
// goroutine of its own woken by the bus, until ctx ends.
func subscribeCount(ctx context.Context, b *bus.Bus, filter string, tags, bad *atomic.Uint64) error {
	wake := make(chan struct{}, 1)
	sub, err := b.NewSubscriber(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	if err := sub.SubscribeLive(filter); err != nil {
		return err
	}
	good := []byte(`"q":"good"`)
	go func() {
		defer sub.Close()
		buf := make([]bus.Message, 0, 1024)
		for {
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
			for {
				batch := sub.Drain(buf[:0], 256<<10)
				for _, m := range batch.Msgs {
					if !bytes.Contains(m.Payload, good) {
						bad.Add(1)
					}
				}
				tags.Add(uint64(len(batch.Msgs)))
				if !batch.More {
					break
				}
			}
		}
	}()
	return nil
}

// pollGoburrow is the plain loop: per device a goburrow client
// (modbus.NewClient over its TCP handler) reading the layout's registers
// every interval, the 30 tags decoded by hand.
func pollGoburrow(ctx context.Context, addrs []string, interval time.Duration, w window) error {
	var tags, bad atomic.Uint64
	var errs errorKinds
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, a := range addrs {
		h := modbus.NewTCPClientHandler(a)
		h.Timeout = 2 * time.Second
		h.IdleTimeout = time.Hour
		c := modbus.NewClient(h)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer h.Close()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			values := make([]float64, len(mbsim.Tags))
			for {
				data, err := c.ReadHoldingRegisters(0, uint16(mbsim.Registers))
				if err != nil || len(data) != 2*mbsim.Registers {
					bad.Add(uint64(len(mbsim.Tags)))
					errs.note(err)
					// A late answer stays in the stream and every later
					// read would take its predecessor's (goburrow #64):
					// start over on a new connection, as a careful
					// client of it must.
					h.Close()
				} else {
					decodeLayout(data, values)
					tags.Add(uint64(len(values)))
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	err := w.measure(ctx, "goburrow", func() (uint64, uint64) { return tags.Load(), bad.Load() })
	cancel()
	wg.Wait()
	errs.print("goburrow")
	return err
}

// errorKinds counts failed reads by their error, digits left out (ids
// and counts vary).
type errorKinds struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *errorKinds) note(err error) {
	k := "short response"
	if err != nil {
		k = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return -1
			}
			return r
		}, err.Error())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[k]++
}

// print writes the counts to stderr.
func (e *errorKinds) print(who string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, n := range e.n {
		fmt.Fprintf(os.Stderr, "%s: %d reads failed: %s\n", who, n, k)
	}
}

// decodeLayout decodes every tag of the layout from a read of all its
// registers, as the poller's configuration types them.
func decodeLayout(data []byte, values []float64) {
	for k, t := range mbsim.Tags {
		b := data[2*t.Address:]
		switch t.Type {
		case mbsim.U16:
			values[k] = float64(binary.BigEndian.Uint16(b))
		case mbsim.I16:
			values[k] = float64(int16(binary.BigEndian.Uint16(b)))
		case mbsim.U32:
			values[k] = float64(binary.BigEndian.Uint32(b))
		case mbsim.I32:
			values[k] = float64(int32(binary.BigEndian.Uint32(b)))
		case mbsim.F32:
			values[k] = float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
		case mbsim.F64:
			values[k] = math.Float64frombits(binary.BigEndian.Uint64(b))
		}
	}
}

// readAddrs reads the simulator's "device I ADDR" lines from a file.
func readAddrs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "device" {
			out = append(out, f[2])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no devices", path)
	}
	return out, nil
}
