package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgemux/edgemux/protocols/modbus/wire"
)

// Line is one path to devices with one request in flight at a time:
// a serial bus is shared by all its devices, and a TCP device that
// allows one connection is shared by all masters through this one.
// Writes wait in their own queue and go ahead of reads.
type Line struct {
	cfg    LineConfig
	timing wire.Timing
	log    *slog.Logger

	mu      sync.Mutex
	writes  []*request
	reads   []*request
	closed  bool
	started bool
	wake    chan struct{} // cap 1: something was queued or the line closed
	quit    chan struct{}
	stopped chan struct{}
	devices []*Device
	dialIn  dialIn // KindDialIn: the connection the device opened, if any (dialin.go)

	// Owned by the line's goroutine.
	port    port
	tid     uint16
	in      []byte    // bytes read and not yet consumed (a late response, say)
	quietAt time.Time // when the line last went quiet (RTU: t3.5 runs from here)
}

// Device is one device on a line, by its unit id.
type Device struct {
	cfg    DeviceConfig
	line   *Line
	health health
}

type request struct {
	dev  *Device
	pdu  []byte
	done func(Result)
}

// NewLine returns a line that starts nothing until Start.
func NewLine(cfg LineConfig, log *slog.Logger) *Line {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	return &Line{cfg: cfg, timing: wire.LineTiming(cfg.Baud, cfg.bitsPerChar()),
		log: log.With("line", cfg.Name), wake: make(chan struct{}, 1),
		quit: make(chan struct{}), stopped: make(chan struct{})}
}

// Name is the line's configured name.
func (l *Line) Name() string { return l.cfg.Name }

// AddDevice adds a device to the line; call it before Start.
func (l *Line) AddDevice(cfg DeviceConfig) *Device {
	d := &Device{cfg: cfg.withDefaults(), line: l}
	d.health.h = Health{Name: cfg.Name, Line: l.cfg.Name, Unit: cfg.Unit, DialIn: l.cfg.Kind == KindDialIn}
	l.devices = append(l.devices, d)
	return d
}

// Devices lists the line's devices in the order added.
func (l *Line) Devices() []*Device { return l.devices }

// Start runs the line's goroutine.
func (l *Line) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started && !l.closed {
		l.started = true
		go l.run()
	}
}

// Close fails every queued request with ErrClosed, waits for the one in
// flight to finish and closes the port. Idempotent.
func (l *Line) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.stopped
		return
	}
	l.closed = true
	if !l.started {
		close(l.stopped)
	}
	queued := append(l.writes, l.reads...)
	l.writes, l.reads = nil, nil
	attached := l.dialIn.port
	close(l.quit)
	l.mu.Unlock()
	if attached != nil {
		attached.Close() // the line's goroutine may not have taken it yet
	}
	for _, r := range queued {
		r.dev.health.count(func(h *Health) { h.Refused++; h.Requests++ })
		r.done(Result{Err: ErrClosed})
	}
	<-l.stopped
}

// Health is a snapshot of the device's state and counters.
func (d *Device) Health() Health { return d.health.snapshot() }

// Name is the device's configured name.
func (d *Device) Name() string { return d.cfg.Name }

// Submit queues a request PDU for the device; done is called once with
// its result, on the line's goroutine (or on the caller's, when the
// request is refused at once), so it must not block. pdu is copied.
// Writes go ahead of queued reads. A request to unit 0 is a broadcast:
// writes only, sent once and not awaited.
func (d *Device) Submit(pdu []byte, done func(Result)) {
	if err := d.check(pdu); err != nil {
		d.health.count(func(h *Health) { h.Refused++; h.Requests++ })
		done(Result{Err: err})
		return
	}
	r := &request{dev: d, pdu: append([]byte(nil), pdu...), done: done}
	l := d.line
	l.mu.Lock()
	var err error
	switch {
	case l.closed:
		err = ErrClosed
	case len(l.writes)+len(l.reads) >= l.cfg.Queue:
		err = ErrQueueFull
	case wire.IsWrite(pdu):
		l.writes = append(l.writes, r)
	default:
		l.reads = append(l.reads, r)
	}
	l.mu.Unlock()
	if err != nil {
		d.health.count(func(h *Health) { h.Refused++; h.Requests++ })
		done(Result{Err: err})
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (d *Device) check(pdu []byte) error {
	switch {
	case len(pdu) == 0 || len(pdu) > wire.MaxPDU:
		return fmt.Errorf("%w: PDU of %d bytes", ErrBadRequest, len(pdu))
	case d.cfg.Unit == 0 && !wire.IsWrite(pdu):
		return fmt.Errorf("%w: a broadcast must be a write", ErrBadRequest)
	case !d.line.cfg.Kind.framesMBAP() && wire.ResponsePDULen(pdu) == 0:
		// RTU frames responses by function; only the functions whose
		// response length is known can be read back off the line.
		return fmt.Errorf("%w: function %#x not supported over RTU", ErrBadRequest, pdu[0])
	}
	return nil
}

// Do submits a request and waits for its result or ctx.
func (d *Device) Do(ctx context.Context, pdu []byte) Result {
	ch := make(chan Result, 1)
	d.Submit(pdu, func(r Result) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	}
}

// next takes the next request, writes first, or nil once the line closed.
func (l *Line) next() *request {
	for {
		l.mu.Lock()
		var r *request
		switch {
		case l.closed:
		case len(l.writes) > 0:
			r, l.writes = l.writes[0], l.writes[1:]
		case len(l.reads) > 0:
			r, l.reads = l.reads[0], l.reads[1:]
		}
		closed := l.closed
		l.mu.Unlock()
		if r != nil || closed {
			return r
		}
		select {
		case <-l.wake:
		case <-l.quit:
		}
	}
}

func (l *Line) run() {
	defer close(l.stopped)
	defer func() {
		if l.port != nil {
			l.port.Close()
		}
	}()
	for r := l.next(); r != nil; r = l.next() {
		res := l.serve(r)
		r.done(res)
		if d := r.dev.cfg.Delay; d > 0 {
			l.sleep(d)
		}
	}
}

// sleep waits d or until the line closes, and reports whether it is open.
func (l *Line) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.quit:
		return false
	}
}

// serve runs one request to its end: attempts with backoff between them,
// none for a broadcast, and only one while the device is demoted (its
// probe), so a dead device costs its line one timeout per probe.
func (l *Line) serve(r *request) Result {
	d := r.dev
	if !d.health.admit(time.Now(), d.cfg.ProbeEvery) {
		return Result{Err: ErrDemoted}
	}
	attempts := 1 + d.cfg.Retries
	if d.cfg.Unit == 0 || d.Health().Demoted {
		attempts = 1
	}
	var res Result
	backoff := d.cfg.Backoff
	for a := range attempts {
		res = l.attempt(d, r.pdu)
		if res.Err == nil {
			break
		}
		retry := a+1 < attempts
		d.health.attemptFailed(res.Err, retry)
		if !retry || !l.sleep(backoff) {
			break
		}
		backoff *= 2
	}
	d.health.done(res, d.cfg.DemoteAfter, time.Now(), d.cfg.ProbeEvery)
	if res.Err != nil {
		l.log.Debug("request failed", "device", d.cfg.Name, "err", res.Err)
	}
	return res
}

// attempt connects if needed and exchanges one request and response.
func (l *Line) attempt(d *Device, pdu []byte) Result {
	if l.cfg.Kind == KindDialIn {
		if err := l.takeAttached(d); err != nil {
			return Result{Err: err}
		}
	} else if l.port == nil {
		p, err := dialPort(l.cfg)
		if err != nil {
			return Result{Err: err}
		}
		l.port, l.in, l.quietAt = p, l.in[:0], time.Now()
		if d.cfg.ConnectDelay > 0 && !l.sleep(d.cfg.ConnectDelay) {
			return Result{Err: ErrClosed}
		}
	}
	var res Result
	if l.cfg.Kind.framesMBAP() {
		res = l.exchangeMBAP(d, pdu)
	} else {
		res = l.exchangeRTU(d, pdu)
	}
	if res.Err != nil && !isAnswerError(res.Err) {
		// The stream is broken or out of step: start over on a new
		// connection (a serial port is reopened the same way; a dial-in
		// device's connection is closed, and the device must call again).
		l.port.Close()
		l.Detach(l.port)
		l.port = nil
	}
	return res
}
