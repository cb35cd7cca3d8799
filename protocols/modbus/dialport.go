package modbus

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/modbus/upstream"
)

// maxPortBytes bounds what waits in a connPort either way. The line has
// one request (at most 260 bytes) in flight, and its device answers that;
// a device that sends this much unasked is not speaking Modbus.
const maxPortBytes = 16 << 10

// errLineLetGo closes a dial-in connection whose line closed it (the
// stream was out of step, a newer connection replaced it, the gateway
// stops).
var errLineLetGo = errors.New("modbus: the dial-in device's line closed its connection")

// connPort is an upstream.Port over a connection the event loop owns.
// The line's goroutine calls Read, Write and the deadlines; the owning
// worker calls feed (from Data), drain (from Notified) and gone (from
// Closed): the only bytes that cross are under mu, and the socket is
// touched only by its worker.
type connPort struct {
	conn protocols.Conn

	mu       sync.Mutex
	in       []byte    // from the device, not yet read by the line
	out      []byte    // from the line, not yet written to the socket
	closed   bool      // Close or gone: no more reads or writes
	ended    bool      // gone: the connection itself ended
	deadline time.Time // for Read
	readable chan struct{}
}

var _ upstream.Port = (*connPort)(nil)

func newConnPort(c protocols.Conn) *connPort {
	return &connPort{conn: c, readable: make(chan struct{}, 1)}
}

// Read waits for the device's bytes until the read deadline.
func (p *connPort) Read(b []byte) (int, error) {
	for {
		p.mu.Lock()
		n := copy(b, p.in)
		p.in = p.in[:copy(p.in, p.in[n:])]
		closed, deadline := p.closed, p.deadline
		p.mu.Unlock()
		switch {
		case n > 0:
			return n, nil
		case closed:
			return 0, net.ErrClosed
		}
		if !p.wait(deadline) {
			return 0, os.ErrDeadlineExceeded
		}
	}
}

// wait waits for feed or gone, or reports false once deadline passed.
func (p *connPort) wait(deadline time.Time) bool {
	if deadline.IsZero() {
		<-p.readable
		return true
	}
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.readable:
		return true
	case <-t.C:
		return false
	}
}

func (p *connPort) signal() {
	select {
	case p.readable <- struct{}{}:
	default:
	}
}

// Write queues b for the worker, which writes it from Notified: the
// socket belongs to the worker. It never blocks.
func (p *connPort) Write(b []byte) (int, error) {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return 0, net.ErrClosed
	case len(p.out)+len(b) > maxPortBytes:
		p.mu.Unlock()
		return 0, fmt.Errorf("modbus: dial-in device does not read: %w", protocols.ErrBackpressure)
	}
	p.out = append(p.out, b...)
	p.mu.Unlock()
	p.conn.Notify()
	return len(b), nil
}

// SetReadDeadline sets Read's deadline.
func (p *connPort) SetReadDeadline(t time.Time) error {
	p.mu.Lock()
	p.deadline = t
	p.mu.Unlock()
	p.signal() // a Read waiting re-reads its deadline
	return nil
}

// SetWriteDeadline has nothing to do: Write does not block.
func (p *connPort) SetWriteDeadline(time.Time) error { return nil }

// Close lets go of the connection: the worker closes it at its next
// Notified. Safe from any goroutine; twice is harmless.
func (p *connPort) Close() error {
	p.mu.Lock()
	was, ended := p.closed, p.ended
	p.closed = true
	p.mu.Unlock()
	p.signal()
	if !was && !ended {
		p.conn.Notify()
	}
	return nil
}

// feed hands the device's bytes to the line (on the worker).
func (p *connPort) feed(in []byte) (int, error) {
	p.mu.Lock()
	defer p.signal()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errLineLetGo
	}
	if len(p.in)+len(in) > maxPortBytes {
		return 0, fmt.Errorf("modbus: dial-in device sent %d bytes nobody asked for: %w", len(p.in)+len(in), protocols.ErrMalformed)
	}
	p.in = append(p.in, in...)
	return len(in), nil
}

// drain writes the line's bytes to the socket (on the worker), and
// closes the connection if the line let go of it.
func (p *connPort) drain() error {
	p.mu.Lock()
	out, closed := p.out, p.closed
	p.out = nil
	p.mu.Unlock()
	if len(out) > 0 {
		if err := p.conn.Write(out); err != nil {
			return err
		}
	}
	if closed {
		return errLineLetGo
	}
	return nil
}

// gone records that the connection ended (on the worker, from Closed).
func (p *connPort) gone() {
	p.mu.Lock()
	p.closed, p.ended = true, true
	p.mu.Unlock()
	p.signal()
}
