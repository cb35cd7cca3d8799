package north

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/net/proxy"
)

// Paho writes every packet with a Write of its own and reads a packet a
// byte at a time: the fixed header's first byte, each length byte, then
// the rest. Straight on a socket that is a write(2) per PUBLISH and three
// read(2)s per PUBACK, which measured at 60 % of the MQTT sink's CPU at
// full rate. So the sink gives paho a connection of its own (batchConn):
// reads come out of a buffer, and writes are copied into a batch that one
// flusher goroutine hands to the socket; while the flusher is inside
// write(2), the packets paho passes on pile up and leave together in the
// next one. A packet is never held back waiting for company: the flusher
// writes as soon as there is anything to write.
const (
	readBuffer   = 16 << 10  // bytes the reader takes from the socket at a time
	maxBatch     = 256 << 10 // a writer waits while this much is queued (one bigger packet still goes)
	flushTimeout = stateTimeout
	closeFlush   = time.Second // Close waits this long for queued bytes (the DISCONNECT) to go
)

// errWriteTimeout is a batch the broker did not take within flushTimeout.
var errWriteTimeout = errors.New("north: mqtt write timed out")

// dialMQTT is the sink's paho OpenConnectionFunc: TCP (through a proxy
// the environment names, as paho's own dialer does), TLS for ssl://,
// tls:// and mqtts://, and a batchConn around either.
func dialMQTT(tlsConf *tls.Config) mqtt.OpenConnectionFunc {
	return func(uri *url.URL, o mqtt.ClientOptions) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), o.ConnectTimeout)
		defer cancel()
		d := proxy.FromEnvironmentUsing(&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second})
		var raw net.Conn
		var err error
		if cd, ok := d.(proxy.ContextDialer); ok {
			raw, err = cd.DialContext(ctx, "tcp", uri.Host)
		} else {
			raw, err = d.Dial("tcp", uri.Host)
		}
		if err != nil {
			return nil, err
		}
		switch uri.Scheme {
		case "ssl", "tls", "mqtts":
			conf := &tls.Config{}
			if tlsConf != nil {
				conf = tlsConf.Clone()
			}
			if conf.ServerName == "" {
				conf.ServerName = uri.Hostname()
			}
			tc := tls.Client(raw, conf)
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			raw = tc
		}
		return newBatchConn(raw, flushTimeout), nil
	}
}

// batchConn buffers paho's reads and batches its writes (see above).
// Reads come from paho's one reading goroutine; writes from its one
// writing goroutine, and from none once the connection is closed.
//
// A Write returns once its bytes are queued, not sent; a socket's own
// buffer made the same promise, and QoS 1 is settled by the PUBACK, not
// by the write. Write deadlines are the flusher's: each batch must be
// taken by the broker within flushTimeout (paho's own write timeout is
// the same), or the connection is closed and every later Write fails.
type batchConn struct {
	net.Conn
	r *bufio.Reader

	mu      sync.Mutex
	wake    sync.Cond // the flusher waits on it for bytes, writers for room, Close for the drain
	queued  []byte    // the batch being filled
	spare   []byte    // the last batch's buffer, for the next
	writing bool      // the flusher is inside a write
	closed  bool      // Close was called: the flusher drains and stops
	err     error     // the write that failed; every later Write returns it
	done    chan struct{}
	timeout time.Duration // a batch's write deadline
}

func newBatchConn(c net.Conn, timeout time.Duration) *batchConn {
	b := &batchConn{Conn: c, r: bufio.NewReaderSize(c, readBuffer), done: make(chan struct{}), timeout: timeout}
	b.wake.L = &b.mu
	go b.flush()
	return b
}

func (b *batchConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// Write queues p for the flusher, waiting while a full batch is queued.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && !b.closed && len(b.queued) > 0 && len(b.queued)+len(p) > maxBatch {
		b.wake.Wait()
	}
	switch {
	case b.err != nil:
		return 0, b.err
	case b.closed:
		return 0, net.ErrClosed
	}
	if len(b.queued) == 0 && !b.writing {
		b.wake.Broadcast() // the flusher is (or is about to be) waiting for bytes
	}
	b.queued = append(b.queued, p...)
	return len(p), nil
}

// flush writes out what is queued, a batch at a time, until Close has
// been called and nothing is left, or a write fails.
func (b *batchConn) flush() {
	defer close(b.done)
	defer b.Conn.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for len(b.queued) == 0 && !b.closed {
			b.wake.Wait()
		}
		if len(b.queued) == 0 {
			return // closed and drained
		}
		out := b.queued
		b.queued, b.spare = b.spare[:0], nil
		b.writing = true
		b.mu.Unlock()
		err := b.write(out)
		b.mu.Lock()
		b.writing = false
		if cap(out) <= maxBatch { // one outsize packet's buffer is not kept
			b.spare = out[:0]
		}
		b.wake.Broadcast() // writers waiting for room, Close waiting for the drain
		if err != nil {
			b.err = err
			return
		}
	}
}

func (b *batchConn) write(out []byte) error {
	if err := b.Conn.SetWriteDeadline(time.Now().Add(b.timeout)); err != nil {
		return err
	}
	_, err := b.Conn.Write(out)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errWriteTimeout
	}
	return err
}

// Close lets the flusher send what is queued (paho closes right after
// writing DISCONNECT, which must reach the broker or it publishes the
// will), waiting at most closeFlush, and closes the socket.
func (b *batchConn) Close() error {
	b.mu.Lock()
	already := b.closed
	b.closed = true
	b.wake.Broadcast()
	b.mu.Unlock()
	if already {
		<-b.done
		return net.ErrClosed
	}
	t := time.NewTimer(closeFlush)
	defer t.Stop()
	select {
	case <-b.done:
	case <-t.C:
		b.Conn.Close() // the flusher's write fails and it stops
		<-b.done
	}
	return nil
}

// SetDeadline sets the read deadline; writes have the flusher's (above).
func (b *batchConn) SetDeadline(t time.Time) error { return b.Conn.SetReadDeadline(t) }

// SetWriteDeadline is a no-op: a Write only queues.
func (b *batchConn) SetWriteDeadline(time.Time) error { return nil }
