package main

import (
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

// Handshake errors.
var (
	errNoAck     = errors.New("loadgen: expected an ACK")
	errRefused   = errors.New("loadgen: gateway refused the request")
	errBadFrames = errors.New("loadgen: bad frame from gateway")
)

// ackFrameLen is an ACK frame's size: header and msg id + status.
const ackFrameLen = private.HeaderLen + 5

// sourceAddr is the i-th connection's source address: 127.0.0.2 up to
// 127.0.0.(sources+1), round robin. Loopback only, by construction.
func sourceAddr(i, sources int) *net.TCPAddr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%sources))}
}

// deviceID names connection i.
func deviceID(prefix, role string, i int) string {
	return fmt.Sprintf("%s-%s-%d", prefix, role, i)
}

// dialDevice connects from src, sends HELLO for id and waits for the
// gateway's ACK, all within timeout.
func dialDevice(ctx context.Context, addr string, src *net.TCPAddr, id string, timeout time.Duration) (net.Conn, error) {
	hello, err := private.AppendHello(nil, private.Hello{DeviceID: []byte(id)})
	if err != nil {
		return nil, err
	}
	d := net.Dialer{LocalAddr: src, Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := request(c, hello, 0, timeout); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	return c, nil
}

// request writes frame and reads the ACK for msgID, which must be the
// next frame the gateway sends.
func request(c net.Conn, frame []byte, msgID uint32, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(frame); err != nil {
		return err
	}
	var buf [ackFrameLen]byte
	if _, err := io.ReadFull(c, buf[:]); err != nil {
		return err
	}
	return checkAck(buf[:], msgID)
}

// checkAck validates an ACK frame for msgID with status OK.
func checkAck(b []byte, msgID uint32) error {
	f, n, err := private.ParseFrame(b, 64)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadFrames, err)
	}
	if n == 0 || f.Type != private.TypeAck {
		return fmt.Errorf("%w (got %v)", errNoAck, f.Type)
	}
	a, err := private.DecodeAck(f.Payload)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadFrames, err)
	}
	if a.MsgID != msgID || a.Status != private.CodeOK {
		return fmt.Errorf("%w: msg %d status %v", errRefused, a.MsgID, a.Status)
	}
	return nil
}

// dialAll opens n connections with at most parallel handshakes in flight.
// open makes connection i; the result slice has nil where it failed.
// It stops early, leaving the rest nil, when ctx ends.
func dialAll(ctx context.Context, n, parallel int, open func(i int) (net.Conn, error)) (conns []net.Conn, failed int, firstErr error) {
	conns = make([]net.Conn, n)
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(parallel, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				c, err := open(i)
				if err != nil {
					mu.Lock()
					failed++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	return conns, failed, firstErr
}

// connState says whether the gateway has closed c, without blocking and
// without consuming input: a non-blocking MSG_PEEK that sees EOF or an
// error means closed.
func connState(c net.Conn) (closed bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == syscall.EAGAIN:
			closed = false
		case rerr != nil || n == 0:
			closed = true
		}
		return true // never wait for readiness
	})
	return closed || err != nil
}

// frameCount is what countFrames found in a buffer.
type frameCount struct {
	pubs, errors, acks int
	slow               int // ERROR frames saying SLOW_CONSUMER
}

// countFrames counts the whole frames at the start of buf and returns the
// bytes they used; a framing error is returned as is.
func countFrames(buf []byte, maxFrame int) (fc frameCount, used int, err error) {
	for {
		f, n, err := private.ParseFrame(buf[used:], maxFrame)
		if err != nil || n == 0 {
			return fc, used, err
		}
		used += n
		switch f.Type {
		case private.TypePub:
			fc.pubs++
		case private.TypeError:
			fc.errors++
			if e, err := private.DecodeError(f.Payload); err == nil && e.Code == private.CodeSlowConsumer {
				fc.slow++
			}
		case private.TypeAck:
			fc.acks++
		}
	}
}
