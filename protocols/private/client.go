package private

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp"
)

// Client errors.
var (
	ErrClientClosed = errors.New("private: client closed")
	ErrNoAnswer     = errors.New("private: no answer in time")
	ErrUnexpected   = errors.New("private: unexpected frame from server")
)

// Client defaults for zero ClientOptions fields.
const (
	DefaultClientQueue   = 256
	DefaultClientTimeout = 10 * time.Second
	clientReadChunk      = 4096
)

// ClientOptions tune a Client; zero fields take defaults.
type ClientOptions struct {
	Keepalive time.Duration // announced in HELLO (whole seconds, capped at 65535)
	MaxFrame  int           // largest payload accepted from the server (DefaultMaxFrame)
	Queue     int           // capacity of the Messages channel (DefaultClientQueue)
	Timeout   time.Duration // wait for an ACK and for a write to go out (DefaultClientTimeout)
	Dialer    *net.Dialer   // nil: a zero net.Dialer
	// OnError, if set, receives the server's non-fatal ERROR frames (a
	// request with msg id 0 failed). It runs on the reader goroutine and
	// must not block.
	OnError func(code Code, text string)
}

func (o ClientOptions) withDefaults() ClientOptions {
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	o.MaxFrame = min(o.MaxFrame, MaxFrameCap)
	if o.Queue <= 0 {
		o.Queue = DefaultClientQueue
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultClientTimeout
	}
	if o.Dialer == nil {
		o.Dialer = &net.Dialer{}
	}
	return o
}

// Delivery is a message the server delivered for a subscription.
type Delivery struct {
	Topic    string
	Data     []byte
	Src      string    // protocol the message was published on
	TS       time.Time // when the bus accepted it
	Retained bool      // replayed from the last-value cache on SUB
}

// Client is a device-side connection speaking the private protocol over
// TCP. Its methods are safe for concurrent use. Deliveries arrive on
// Messages; read them, or the reader stalls and the server eventually
// drops the connection as a slow consumer.
type Client struct {
	conn net.Conn
	opt  ClientOptions

	wmu  sync.Mutex // serialises writes; guards wbuf
	wbuf []byte

	nextID atomic.Uint32

	mu      sync.Mutex // guards pending, pings, reason
	pending map[uint32]chan Code
	pings   map[uint64]chan struct{}
	reason  error

	dropped atomic.Uint64 // deliveries the server reported dropped (DROPPED)

	msgs      chan Delivery
	closing   chan struct{} // closed by Close
	done      chan struct{} // closed when the reader has stopped
	closeOnce sync.Once
}

// Dial connects to addr over TCP, sends HELLO for deviceID and waits for
// the server's ACK (bounded by ctx).
func Dial(ctx context.Context, addr string, deviceID string, opt ClientOptions) (*Client, error) {
	opt = opt.withDefaults()
	hello, err := encodeHello(deviceID, opt)
	if err != nil {
		return nil, err
	}
	conn, err := opt.Dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("private: dial %s: %w", addr, err)
	}
	return start(ctx, conn, hello, opt)
}

// DialUDP opens a session of the reliable UDP core with addr (SPEC.md,
// "The datagram binding"), sends HELLO for deviceID and waits for the
// server's ACK (bounded by ctx). The Client then works as over TCP;
// PublishUnreliable sends telemetry that may be lost.
func DialUDP(ctx context.Context, addr string, deviceID string, cfg rudp.Config, opt ClientOptions) (*Client, error) {
	opt = opt.withDefaults()
	hello, err := encodeHello(deviceID, opt)
	if err != nil {
		return nil, err
	}
	s, err := rudp.Dial(ctx, addr, cfg, rudp.StreamDialOptions{})
	if err != nil {
		return nil, fmt.Errorf("private: %w", err)
	}
	return start(ctx, s, hello, opt)
}

// encodeHello encodes the HELLO a client opens with.
func encodeHello(deviceID string, opt ClientOptions) ([]byte, error) {
	return AppendHello(nil, Hello{DeviceID: []byte(deviceID), Keepalive: uint16(min(opt.Keepalive/time.Second, maxU16))})
}

// start runs a client on conn: HELLO, then the server's ACK.
func start(ctx context.Context, conn net.Conn, frame []byte, opt ClientOptions) (*Client, error) {
	c := newClient(conn, opt)
	ack := c.expectAck(0)
	go c.readLoop()
	if err := c.write(frame); err != nil {
		c.Close()
		return nil, err
	}
	select {
	case code := <-ack:
		if code != CodeOK {
			c.Close()
			return nil, code
		}
		return c, nil
	case <-c.done:
		// The reader may have passed on the server's answer before it met
		// the close that followed it, and select picks either: a refusal
		// (an ACK with a status, say busy) is the answer, not the EOF.
		c.Close()
		select {
		case code := <-ack:
			if code != CodeOK {
				return nil, code
			}
		default:
		}
		return nil, c.Err()
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	}
}

func newClient(conn net.Conn, opt ClientOptions) *Client {
	return &Client{
		conn:    conn,
		opt:     opt,
		pending: make(map[uint32]chan Code),
		pings:   make(map[uint64]chan struct{}),
		msgs:    make(chan Delivery, opt.Queue),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Messages returns the deliveries channel; it is closed when the
// connection ends.
func (c *Client) Messages() <-chan Delivery { return c.msgs }

// Err reports why the connection ended, nil while it is up.
func (c *Client) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// Close ends the connection and waits for the reader. It is idempotent.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closing)
		err = c.conn.Close()
	})
	<-c.done
	return err
}

// Publish sends data to topic. With ack it waits for the server's ACK and
// returns the failure's Code (errors.Is(err, CodeBadTopic)...); without,
// it returns once the frame is written.
func (c *Client) Publish(topic string, data []byte, ack bool) error {
	var id uint32
	if ack {
		id = c.newID()
	}
	m := Pub{MsgID: id, Topic: []byte(topic), Data: data}
	return c.request(id, func(dst []byte) ([]byte, error) { return AppendPub(dst, m) })
}

// ErrNotDatagram is what PublishUnreliable returns on a TCP client.
var ErrNotDatagram = errors.New("private: not a datagram session (DialUDP)")

// PublishUnreliable sends data to topic on the reliable UDP core's
// unreliable channel (a client from DialUDP): one datagram, no ACK, maybe
// lost; for telemetry whose next sample replaces a lost one. It fails
// with rudp.ErrTooLarge when the frame does not fit one datagram.
func (c *Client) PublishUnreliable(topic string, data []byte) error {
	s, ok := c.conn.(*rudp.Stream)
	if !ok {
		return ErrNotDatagram
	}
	frame, err := AppendPub(nil, Pub{Topic: []byte(topic), Data: data})
	if err != nil {
		return err
	}
	return s.SendUnreliable(frame)
}

// Subscribe adds a filter (MQTT wildcards + and #) and waits for the ACK.
func (c *Client) Subscribe(filter string) error {
	id := c.newID()
	m := Sub{MsgID: id, Filter: []byte(filter)}
	return c.request(id, func(dst []byte) ([]byte, error) { return AppendSub(dst, m) })
}

// Unsubscribe removes a filter and waits for the ACK.
func (c *Client) Unsubscribe(filter string) error {
	id := c.newID()
	m := Sub{MsgID: id, Filter: []byte(filter)}
	return c.request(id, func(dst []byte) ([]byte, error) { return AppendUnsub(dst, m) })
}

// Ping sends a PING and waits for its PONG or for ctx.
func (c *Client) Ping(ctx context.Context) error {
	token := uint64(c.newID())<<32 | uint64(time.Now().UnixNano()&0xffffffff)
	pong := make(chan struct{})
	c.mu.Lock()
	c.pings[token] = pong
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pings, token)
		c.mu.Unlock()
	}()
	var tok [8]byte
	binary.BigEndian.PutUint64(tok[:], token)
	if err := c.write(AppendFrame(nil, TypePing, tok[:])); err != nil {
		return err
	}
	select {
	case <-pong:
		return nil
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newID returns a non-zero message id.
func (c *Client) newID() uint32 {
	for {
		if id := c.nextID.Add(1); id != 0 {
			return id
		}
	}
}

// request writes one frame and, for a non-zero id, waits for its ACK.
func (c *Client) request(id uint32, encode func([]byte) ([]byte, error)) error {
	var ack chan Code
	if id != 0 {
		ack = c.expectAck(id)
		defer c.forgetAck(id)
	}
	c.wmu.Lock()
	frame, err := encode(c.wbuf[:0])
	if err == nil {
		c.wbuf = frame
		err = c.writeLocked(frame)
	}
	c.wmu.Unlock()
	if err != nil || id == 0 {
		return err
	}
	timer := time.NewTimer(c.opt.Timeout)
	defer timer.Stop()
	select {
	case code := <-ack:
		if code != CodeOK {
			return code
		}
		return nil
	case <-c.done:
		return c.Err()
	case <-timer.C:
		return ErrNoAnswer
	}
}

func (c *Client) expectAck(id uint32) chan Code {
	ch := make(chan Code, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	return ch
}

func (c *Client) forgetAck(id uint32) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(frame)
}

func (c *Client) writeLocked(frame []byte) error {
	select {
	case <-c.closing:
		return ErrClientClosed
	default:
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.opt.Timeout))
	if _, err := c.conn.Write(frame); err != nil {
		return fmt.Errorf("private: write: %w", err)
	}
	return nil
}

// readLoop reads frames until the connection ends, then records why,
// closes Messages and wakes every waiter.
func (c *Client) readLoop() {
	err := c.readFrames()
	c.mu.Lock()
	if c.reason == nil {
		c.reason = err
	}
	c.mu.Unlock()
	_ = c.conn.Close()
	// done first: whoever sees Messages closed must find Err set.
	close(c.done)
	close(c.msgs)
}

func (c *Client) readFrames() error {
	buf := make([]byte, 0, clientReadChunk)
	for {
		used, err := c.handleFrames(buf)
		if err != nil {
			return err
		}
		buf = buf[:copy(buf, buf[used:])]
		buf = slices.Grow(buf, clientReadChunk)
		n, err := c.conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			return c.readError(err)
		}
	}
}

// handleFrames handles every whole frame in buf and returns the bytes
// used.
func (c *Client) handleFrames(buf []byte) (used int, err error) {
	for {
		f, n, err := ParseFrame(buf[used:], c.opt.MaxFrame)
		if err != nil {
			_ = c.write(AppendError(nil, CodeOf(err), err.Error()))
			return used, err
		}
		if n == 0 {
			return used, nil
		}
		used += n
		if err := c.handle(f); err != nil {
			return used, err
		}
	}
}

func (c *Client) readError(err error) error {
	select {
	case <-c.closing:
		return ErrClientClosed
	default:
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("private: server closed the connection: %w", err)
	}
	return fmt.Errorf("private: read: %w", err)
}

// handle acts on one server frame; an error ends the connection.
func (c *Client) handle(f Frame) error {
	switch f.Type {
	case TypeAck:
		a, err := DecodeAck(f.Payload)
		if err != nil {
			return err
		}
		c.mu.Lock()
		ch := c.pending[a.MsgID]
		delete(c.pending, a.MsgID)
		c.mu.Unlock()
		if ch != nil {
			ch <- a.Status
		}
	case TypePub:
		return c.deliver(f.Payload)
	case TypePong:
		c.pong(f.Payload)
	case TypePing:
		tok, err := DecodePing(f.Payload)
		if err != nil {
			return err
		}
		return c.write(AppendFrame(nil, TypePong, tok))
	case TypeError:
		return c.serverError(f.Payload)
	case TypeDropped:
		n, err := DecodeDropped(f.Payload)
		if err != nil {
			return err
		}
		c.dropped.Add(n)
	default:
		return fmt.Errorf("%w: %v", ErrUnexpected, f.Type)
	}
	return nil
}

// Dropped is how many deliveries the server said it dropped for this
// client (DROPPED frames, SPEC.md 2.7): messages of its subscriptions it
// will never receive because it did not read fast enough.
func (c *Client) Dropped() uint64 { return c.dropped.Load() }

func (c *Client) deliver(payload []byte) error {
	m, err := DecodePub(payload)
	if err != nil {
		return err
	}
	d := Delivery{
		Topic:    string(m.Topic),
		Data:     append([]byte(nil), m.Data...), // the read buffer is reused
		Src:      string(m.Src),
		TS:       time.Unix(0, m.TS),
		Retained: m.Flags&PubRetained != 0,
	}
	select {
	case c.msgs <- d:
		return nil
	case <-c.closing:
		return ErrClientClosed
	}
}

func (c *Client) pong(payload []byte) {
	if len(payload) != 8 {
		return // not one of ours
	}
	token := binary.BigEndian.Uint64(payload)
	c.mu.Lock()
	ch := c.pings[token]
	delete(c.pings, token)
	c.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// serverError records a fatal ERROR as the connection's end reason (the
// server closes next) and passes the others to OnError.
func (c *Client) serverError(payload []byte) error {
	e, err := DecodeError(payload)
	if err != nil {
		return err
	}
	if !e.Code.Fatal() {
		if c.opt.OnError != nil {
			c.opt.OnError(e.Code, string(e.Text))
		}
		return nil
	}
	c.mu.Lock()
	c.reason = fmt.Errorf("%w (server: %s)", e.Code, e.Text)
	c.mu.Unlock()
	return nil
}
