package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
)

// subReadBuf is a subscriber's read buffer; deliveries are counted, not
// kept, so one buffer per subscriber is all the memory they take.
const subReadBuf = 64 << 10

// pubStats are the counters of one pub run.
type pubStats struct {
	published atomic.Int64 // PUB frames written by publishers
	delivered atomic.Int64 // PUB frames read by subscribers
	writeErrs atomic.Int64 // publishers whose connection failed
	subErrs   atomic.Int64 // ERROR frames and failed subscriber connections
	subSlow   atomic.Int64 // subscribers the gateway dropped as slow consumers
}

var errNotTCP = errors.New("loadgen: not a TCP connection")

// runPub sets up subscribers and publishers, publishes for o.Duration and
// prints the rates.
func runPub(ctx context.Context, o options, out io.Writer) error {
	var st pubStats
	subs, err := openSubscribers(ctx, o)
	if err != nil {
		return err
	}
	defer closeAll(subs)
	var readers sync.WaitGroup
	for _, c := range subs {
		readers.Add(1)
		go func() { defer readers.Done(); readDeliveries(c, &st) }()
	}
	start := time.Now()
	pubs, failed, firstErr := dialAll(ctx, o.Conns, o.Parallel, func(i int) (net.Conn, error) {
		return dialDevice(ctx, o.Addr, sourceAddr(i, o.Sources), deviceID(o.Prefix, "pub", i), o.Timeout)
	})
	defer closeAll(pubs)
	fmt.Fprintf(out, "up mode=pub conns=%d open=%d failed=%d subs=%d sources=%d elapsed=%.1fs\n",
		o.Conns, countOpen(pubs), failed, len(subs), o.Sources, time.Since(start).Seconds())
	if firstErr != nil {
		fmt.Fprintf(out, "first-error %q\n", firstErr.Error())
	}
	if hold(ctx, o.Delay); ctx.Err() != nil {
		return ctx.Err()
	}
	cpu0 := cpuSeconds()
	res := publish(ctx, o, pubs, &st)
	time.Sleep(o.Drain) // late deliveries still in the gateway's queues
	total := st.delivered.Load() - res.deliveredBefore
	closeAll(subs)
	readers.Wait()
	cpu := cpuSeconds() - cpu0
	secs := res.elapsed.Seconds()
	fmt.Fprintf(out, "result mode=pub conns=%d open=%d subs=%d size=%d rate=%d duration=%.2fs "+
		"published=%d pub_per_s=%.0f delivered=%d deliv_per_s=%.0f delivered_after_drain=%d "+
		"dial_failed=%d write_errors=%d sub_errors=%d subs_slow=%d writers=%d burst=%d batch=%d loadgen_cpu_s=%.2f\n",
		o.Conns, countOpen(pubs), len(subs), o.Size, o.Rate, secs,
		res.published, float64(res.published)/secs, res.delivered, float64(res.delivered)/secs, total,
		failed, st.writeErrs.Load(), st.subErrs.Load(), st.subSlow.Load(), o.Writers, o.Burst, o.Batch, cpu)
	return nil
}

// openSubscribers dials the subscribers one by one and subscribes
// subscriber i to "<prefix>/<i>/#".
func openSubscribers(ctx context.Context, o options) ([]net.Conn, error) {
	subs := make([]net.Conn, 0, o.Subs)
	for i := range o.Subs {
		c, err := dialDevice(ctx, o.Addr, sourceAddr(o.Conns+i, o.Sources), deviceID(o.Prefix, "sub", i), o.Timeout)
		if err != nil {
			closeAll(subs)
			return nil, fmt.Errorf("loadgen: subscriber %d: %w", i, err)
		}
		subs = append(subs, c)
		sub, err := private.AppendSub(nil, private.Sub{MsgID: 1, Filter: []byte(fmt.Sprintf("%s/%d/#", o.Prefix, i))})
		if err == nil {
			err = request(c, sub, 1, o.Timeout)
		}
		if err != nil {
			closeAll(subs)
			return nil, fmt.Errorf("loadgen: subscribe %d: %w", i, err)
		}
	}
	return subs, nil
}

// readDeliveries counts PUB frames until the connection ends.
func readDeliveries(c net.Conn, st *pubStats) {
	buf := make([]byte, subReadBuf)
	have := 0
	for {
		n, err := c.Read(buf[have:])
		have += n
		fc, used, ferr := countFrames(buf[:have], private.DefaultMaxFrame)
		st.delivered.Add(int64(fc.pubs))
		st.subErrs.Add(int64(fc.errors))
		st.subSlow.Add(int64(fc.slow))
		have = copy(buf, buf[used:have])
		if ferr != nil || (err != nil && !errors.Is(err, net.ErrClosed)) {
			st.subErrs.Add(1)
			return
		}
		if err != nil {
			return
		}
	}
}

// window is what happened while publishers ran.
type window struct {
	elapsed         time.Duration
	published       int64
	delivered       int64 // during the window
	deliveredBefore int64 // before it (retained replays)
}

// publish spreads the publishers over o.Writers goroutines, lets them
// write for o.Duration (or until ctx ends) and returns the window's
// counts. A few writers with non-blocking writes rather than a goroutine
// per publisher: with thousands of runnable goroutines on two cores the
// subscribers' readers and the stop timer wait seconds for a turn, and the
// figures measure the client's scheduler instead of the gateway.
func publish(ctx context.Context, o options, pubs []net.Conn, st *pubStats) window {
	groups := make([][]*pubConn, o.Writers)
	data := make([]byte, o.Size)
	for i, c := range pubs {
		if c == nil {
			continue
		}
		topic := fmt.Appendf(nil, "%s/%d/d%d", o.Prefix, i%o.Subs, i)
		p, err := newPubConn(c, topic, data, o.Batch)
		if err != nil {
			st.writeErrs.Add(1)
			continue
		}
		groups[i%o.Writers] = append(groups[i%o.Writers], p)
	}
	var perWrite time.Duration // pacing of one writer's writes; 0 = unlimited
	if o.Rate > 0 {
		perWrite = time.Duration(float64(o.Writers*o.Batch) / float64(o.Rate) * float64(time.Second))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	res := window{deliveredBefore: st.delivered.Load()}
	start := time.Now()
	for _, g := range groups {
		wg.Add(1)
		go func() { defer wg.Done(); writeLoop(g, o.Burst, perWrite, &stop, st) }()
	}
	t := time.NewTimer(o.Duration)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	stop.Store(true)
	res.elapsed = time.Since(start)
	res.delivered = st.delivered.Load() - res.deliveredBefore
	wg.Wait()
	res.published = st.published.Load()
	return res
}

// pubConn is one publisher: its connection and batch of identical frames,
// and how far into the current frame the last partial write got.
type pubConn struct {
	rc       syscall.RawConn
	buf      []byte // batch frames back to back
	frameLen int
	pos      int // bytes of the current frame already written
}

func newPubConn(c net.Conn, topic, data []byte, batch int) (*pubConn, error) {
	frame, err := private.AppendPub(nil, private.Pub{Topic: topic, Data: data})
	if err != nil {
		return nil, err
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errNotTCP
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &pubConn{rc: rc, buf: bytes.Repeat(frame, batch), frameLen: len(frame)}, nil
}

// write makes one non-blocking write of what is left of the batch and
// returns the frames it completed; blocked means the socket was full.
func (p *pubConn) write() (frames int, blocked bool, err error) {
	var n int
	var werr error
	cerr := p.rc.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), p.buf[p.pos:])
		return true // never wait: a full socket is skipped this round
	})
	switch {
	case cerr != nil:
		return 0, false, cerr
	case werr == syscall.EAGAIN:
		return 0, true, nil
	case werr != nil:
		return 0, false, werr
	}
	total := p.pos + n
	p.pos = total % p.frameLen
	return total / p.frameLen, false, nil
}

// Pacing limits for writeLoop.
const (
	idleBackoff = 100 * time.Microsecond // every socket of a writer was full
	maxLag      = 100 * time.Millisecond // catch-up after a stall, at most
)

// writeLoop writes to its publishers round robin until stop, up to burst
// writes to one before moving on (back to back, as a device publishing as
// fast as it can, so the gateway finds several frames per read), each
// write paced by perWrite (0: unlimited). It adds its count to st once,
// at the end.
func writeLoop(conns []*pubConn, burst int, perWrite time.Duration, stop *atomic.Bool, st *pubStats) {
	var n int64
	next := time.Now()
	for len(conns) > 0 && !stop.Load() {
		progress := false
		for i := 0; i < len(conns) && !stop.Load(); i++ {
			frames, wrote, err := writeBurst(conns[i], burst, perWrite, &next)
			n += int64(frames)
			progress = progress || wrote
			if err != nil {
				st.writeErrs.Add(1)
				conns = append(conns[:i], conns[i+1:]...)
				i--
			}
		}
		if !progress {
			time.Sleep(idleBackoff)
		}
	}
	st.published.Add(n)
}

// writeBurst makes up to burst writes to p, stopping early when its
// socket is full; wrote reports whether any write went through.
func writeBurst(p *pubConn, burst int, perWrite time.Duration, next *time.Time) (frames int, wrote bool, err error) {
	for range burst {
		if perWrite > 0 {
			*next = pace(*next, perWrite)
		}
		f, blocked, err := p.write()
		frames += f
		if err != nil || blocked {
			return frames, wrote, err
		}
		wrote = true
	}
	return frames, wrote, nil
}

// pace sleeps until next if it is ahead and returns the following slot.
// Sleeps overshoot, so the slots after one are written without sleeping
// until the schedule is caught up; a lag over maxLag is forgiven.
func pace(next time.Time, every time.Duration) time.Time {
	now := time.Now()
	if d := next.Sub(now); d > 0 {
		time.Sleep(d)
	} else if -d > maxLag {
		next = now.Add(-maxLag)
	}
	return next.Add(every)
}
