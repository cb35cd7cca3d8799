package rudp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Stream is a client session on a UDP socket of its own, as a net.Conn:
// the reliable messages both ways form one byte stream, so a protocol
// written for TCP (the private protocol's client) runs over it unchanged.
// It is the client-side I/O shell: one goroutine owns the socket's reads
// and the timers; Write and Close take the same lock and send what they
// can themselves. Safe for concurrent use.
type Stream struct {
	sock *net.UDPConn
	cfg  StreamDialOptions

	mu       sync.Mutex
	cond     *sync.Cond // signalled when input arrives, room frees or the session ends
	c        *Client
	rbuf     []byte // received stream bytes not read yet
	out      []byte // datagram scratch
	err      error  // why the session ended
	closed   bool   // Close was called
	rdl, wdl time.Time

	// kicked is the loop's arm-and-recheck flag: a Write sets it, then
	// cuts the loop's socket wait short; the loop clears it before it
	// computes its wait and looks again after arming the socket's
	// deadline, so a Write between the two is not left waiting for a
	// timer.
	kicked atomic.Bool
	done   chan struct{}
	// idleWait is the longest socket wait without a timer (100 ms);
	// beforeArm, when set, runs between the loop's clearing of kicked
	// and its arming of the socket deadline. Both for tests of the kick;
	// mu guards them.
	idleWait  time.Duration
	beforeArm func()

	datagramsDropped atomic.Uint64
}

// StreamDialOptions tune Dial; zero fields take defaults.
type StreamDialOptions struct {
	// ReadBuffer bounds the received bytes held for Read (default
	// 256 KiB). While it is full no more messages are taken from the
	// session, so the server's sender stops at the receive window.
	ReadBuffer int
	// CloseWait bounds how long Close waits for written data to be
	// acknowledged before it sends CLOSE (default 5 s).
	CloseWait time.Duration
}

// ErrDeadline is what Read and Write return when their deadline passes;
// it is os.ErrDeadlineExceeded, as net.Conn asks.
var ErrDeadline = os.ErrDeadlineExceeded

// Dial opens a session with the rudp server at addr ("host:port") from a
// new UDP socket, and returns once the handshake is done (bounded by ctx
// and cfg.HandshakeTimeout).
func Dial(ctx context.Context, addr string, cfg Config, opts StreamDialOptions) (*Stream, error) {
	if opts.ReadBuffer <= 0 {
		opts.ReadBuffer = 256 << 10
	}
	if opts.CloseWait <= 0 {
		opts.CloseWait = 5 * time.Second
	}
	c, err := NewClient(cfg, nil, time.Now())
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, fmt.Errorf("rudp: dial %s: %w", addr, err)
	}
	s := &Stream{sock: nc.(*net.UDPConn), cfg: opts, c: c, out: make([]byte, 0, MaxDatagram), done: make(chan struct{}), idleWait: 100 * time.Millisecond}
	s.cond = sync.NewCond(&s.mu)
	go s.loop()
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	for s.c.State() == StateHandshake && ctx.Err() == nil {
		s.cond.Wait()
	}
	state, serr := s.c.State(), s.err
	s.mu.Unlock()
	if state != StateEstablished {
		s.abort()
		if serr == nil {
			serr = ctx.Err()
		}
		return nil, fmt.Errorf("rudp: handshake with %s: %w", addr, serr)
	}
	return s, nil
}

// loop reads the socket and runs the timers until the session ends.
func (s *Stream) loop() {
	defer close(s.done)
	buf := make([]byte, 65536)
	for {
		s.kicked.Store(false)
		s.mu.Lock()
		now := time.Now()
		s.c.Tick(now)
		s.flushLocked(now)
		s.takeLocked()
		ended := s.c.State() == StateClosed
		next := s.c.NextDeadline(now)
		idle, hook := s.idleWait, s.beforeArm
		if ended && s.err == nil {
			s.err = s.c.Err()
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		if ended {
			s.sock.Close()
			return
		}
		wait := idle
		if !next.IsZero() {
			wait = min(wait, max(time.Until(next), 0))
		}
		if hook != nil {
			hook()
		}
		s.sock.SetReadDeadline(time.Now().Add(wait))
		if s.kicked.Load() {
			continue
		}
		n, err := s.sock.Read(buf)
		switch {
		case err == nil:
			s.mu.Lock()
			s.c.Input(buf[:n], time.Now())
			s.mu.Unlock()
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, net.ErrClosed):
			s.mu.Lock()
			if s.err == nil {
				s.err = ErrClosed
			}
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		default: // ICMP port unreachable and the like: the idle timeout decides
		}
	}
}

// flushLocked sends every datagram the session has now.
func (s *Stream) flushLocked(now time.Time) {
	for {
		out, ok := s.c.AppendDatagram(s.out[:0], now)
		if !ok {
			return
		}
		s.sock.Write(out) // a lost send is a lost datagram: retransmission covers it
	}
}

// takeLocked moves whole messages into the read buffer while it has room,
// and drops unreliable datagrams (counted): a Stream reads only the
// reliable stream.
func (s *Stream) takeLocked() {
	for len(s.rbuf) < s.cfg.ReadBuffer {
		b, ok := s.c.ReadMessage(s.rbuf)
		if !ok {
			break
		}
		s.rbuf = b
	}
	for {
		if _, ok := s.c.ReadDatagram(s.out[:0]); !ok {
			break
		}
		s.datagramsDropped.Add(1)
	}
}

// kick cuts the loop's socket wait short.
func (s *Stream) kick() {
	s.kicked.Store(true)
	s.sock.SetReadDeadline(time.Now())
}

// Read reads received stream bytes, waiting for some.
func (s *Stream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.rbuf) == 0 {
		if err := s.waitErr(s.rdl); err != nil {
			return 0, err
		}
		s.waitLocked(s.rdl)
	}
	n := copy(p, s.rbuf)
	full := len(s.rbuf) >= s.cfg.ReadBuffer
	s.rbuf = append(s.rbuf[:0], s.rbuf[n:]...)
	if full { // the loop stopped taking messages: take them now
		s.takeLocked()
		s.flushLocked(time.Now()) // a window update
		s.kick()
	}
	return n, nil
}

// Write queues p as reliable messages, waiting while the send queue is
// full; it returns how much was queued.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	written := 0
	for written < len(p) {
		if s.closed || s.err != nil {
			return written, s.errLocked()
		}
		n := min(len(p)-written, s.c.MaxMessage())
		err := s.c.Send(p[written : written+n])
		switch {
		case err == nil:
			written += n
			continue
		case errors.Is(err, ErrQueueFull), errors.Is(err, ErrMemory):
			s.flushLocked(time.Now())
			s.kick()
			if err := s.waitErr(s.wdl); err != nil {
				return written, err
			}
			s.waitLocked(s.wdl)
		default:
			return written, err
		}
	}
	s.flushLocked(time.Now())
	s.kick()
	return written, nil
}

// SendUnreliable sends p on the unreliable channel: once, maybe lost.
func (s *Stream) SendUnreliable(p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.err != nil {
		return s.errLocked()
	}
	if err := s.c.SendUnreliable(p); err != nil {
		return err
	}
	s.flushLocked(time.Now())
	s.kick()
	return nil
}

// waitErr is the error that ends a wait: the session ended, Close, or
// the deadline passed.
func (s *Stream) waitErr(deadline time.Time) error {
	if s.closed || s.err != nil {
		if len(s.rbuf) == 0 {
			return s.errLocked()
		}
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return ErrDeadline
	}
	return nil
}

// waitLocked waits for the loop's signal, or for deadline.
func (s *Stream) waitLocked(deadline time.Time) {
	if deadline.IsZero() {
		s.cond.Wait()
		return
	}
	t := time.AfterFunc(time.Until(deadline), func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	s.cond.Wait()
	t.Stop()
}

func (s *Stream) errLocked() error {
	if s.closed {
		return net.ErrClosed
	}
	if errors.Is(s.err, ErrPeerClosed) {
		return io.EOF
	}
	return s.err
}

// Close waits (at most CloseWait) for what was written to be
// acknowledged, then sends CLOSE and releases the socket.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	deadline := time.Now().Add(s.cfg.CloseWait)
	for s.err == nil && s.c.Buffered() > 0 && time.Now().Before(deadline) {
		s.waitLocked(deadline)
	}
	s.closed = true
	s.c.Close()
	s.flushLocked(time.Now())
	s.cond.Broadcast()
	s.mu.Unlock()
	s.kick()
	<-s.done
	return nil
}

// abort ends the session without waiting (a failed handshake).
func (s *Stream) abort() {
	s.mu.Lock()
	s.closed = true
	s.c.Close()
	s.mu.Unlock()
	s.sock.Close()
	<-s.done
}

// DatagramsDropped counts unreliable datagrams the server sent, which a
// Stream does not read.
func (s *Stream) DatagramsDropped() uint64 { return s.datagramsDropped.Load() }

// Session is the session's counters; safe from any goroutine.
func (s *Stream) Session() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Stats()
}

func (s *Stream) LocalAddr() net.Addr  { return s.sock.LocalAddr() }
func (s *Stream) RemoteAddr() net.Addr { return s.sock.RemoteAddr() }

// SetDeadline sets both deadlines.
func (s *Stream) SetDeadline(t time.Time) error {
	s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

func (s *Stream) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	s.rdl = t
	s.cond.Broadcast()
	s.mu.Unlock()
	return nil
}

func (s *Stream) SetWriteDeadline(t time.Time) error {
	s.mu.Lock()
	s.wdl = t
	s.cond.Broadcast()
	s.mu.Unlock()
	return nil
}

var _ net.Conn = (*Stream)(nil)
