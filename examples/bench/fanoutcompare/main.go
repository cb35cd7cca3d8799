// Command fanout measures one publisher's fan-out to many subscribers over
// edgemux's private protocol or MQTT 3.1.1 (QoS 0), with the same client
// loop for both, so edgemux and mosquitto are driven alike: the
// subscribers connect and subscribe to one topic, one publisher publishes
// to it for a while, and the subscribers count what they receive.
//
//	fanout -proto private -addr 127.0.0.1:5020 -subs 1000 -duration 10s
//	fanout -proto mqtt    -addr 127.0.0.1:1883 -subs 1000 -duration 10s
//
// It prints one line of key=value results. The clients are written here
// (a few frames each) so this module needs nothing but the standard
// library: neither edgemux's go.mod nor this one grows.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

type options struct {
	proto, addr, topic string
	subs, size, rate   int
	duration, drain    time.Duration
	parallel           int
}

func main() {
	var o options
	flag.StringVar(&o.proto, "proto", "private", "private | mqtt")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:5020", "server address")
	flag.StringVar(&o.topic, "topic", "bench/fan", "topic published and subscribed")
	flag.IntVar(&o.subs, "subs", 1000, "subscriber connections")
	flag.IntVar(&o.size, "size", 32, "payload bytes")
	flag.IntVar(&o.rate, "rate", 0, "publishes per second; 0 = as fast as the socket takes them")
	flag.IntVar(&o.parallel, "parallel", 32, "subscribers connecting at once")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long to publish")
	flag.DurationVar(&o.drain, "drain", 2*time.Second, "wait after publishing for deliveries in flight")
	flag.Parse()
	if o.proto != "private" && o.proto != "mqtt" || o.subs < 1 || o.size < 0 || o.size > 60000 {
		fmt.Fprintln(os.Stderr, "fanout: bad flags (see -h)")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// client is one protocol's handful of frames.
type client interface {
	connect(c net.Conn, id string) error
	subscribe(c net.Conn, topic string) error
	publish(dst []byte, topic string, payload []byte) []byte
	// count returns how many deliveries buf holds whole and the bytes
	// they take.
	count(buf []byte) (n, used int, err error)
}

func run(o options) error {
	var cl client = privateClient{}
	if o.proto == "mqtt" {
		cl = mqttClient{}
	}
	subs, err := connectSubscribers(o, cl)
	defer func() {
		for _, c := range subs {
			c.Close()
		}
	}()
	if err != nil {
		return err
	}
	var delivered atomic.Int64
	var readers sync.WaitGroup
	for _, c := range subs {
		readers.Add(1)
		go func() { defer readers.Done(); readDeliveries(c, cl, &delivered) }()
	}
	pub, err := net.Dial("tcp", o.addr)
	if err != nil {
		return err
	}
	defer pub.Close()
	if err := cl.connect(pub, "fanout-pub"); err != nil {
		return fmt.Errorf("publisher: %w", err)
	}
	fmt.Printf("up proto=%s subs=%d\n", o.proto, len(subs))
	published, elapsed, err := publish(o, cl, pub)
	if err != nil {
		return err
	}
	inWindow := delivered.Load()
	time.Sleep(o.drain)
	total := delivered.Load()
	fmt.Printf("result proto=%s subs=%d size=%d rate=%d duration=%.2fs published=%d pub_per_s=%.0f "+
		"delivered=%d deliv_per_s=%.0f delivered_after_drain=%d offered=%d\n",
		o.proto, len(subs), o.size, o.rate, elapsed.Seconds(), published, float64(published)/elapsed.Seconds(),
		inWindow, float64(inWindow)/elapsed.Seconds(), total, published*int64(len(subs)))
	return nil
}

// connectSubscribers connects and subscribes o.subs clients, o.parallel
// at a time.
func connectSubscribers(o options, cl client) ([]net.Conn, error) {
	subs := make([]net.Conn, o.subs)
	errs := make([]error, o.subs)
	sem := make(chan struct{}, o.parallel)
	var wg sync.WaitGroup
	for i := range subs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := net.DialTimeout("tcp", o.addr, 30*time.Second)
			if err == nil {
				subs[i] = c
				c.SetDeadline(time.Now().Add(30 * time.Second))
				err = cl.connect(c, fmt.Sprintf("fanout-sub-%d", i))
			}
			if err == nil {
				err = cl.subscribe(c, o.topic)
			}
			if c != nil {
				c.SetDeadline(time.Time{})
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	kept := subs[:0]
	for _, c := range subs {
		if c != nil {
			kept = append(kept, c)
		}
	}
	return kept, errors.Join(errs...)
}

// publish writes PUBs for o.duration, paced by o.rate if set, through a
// buffered writer (so a fast publisher is not one syscall per message).
func publish(o options, cl client, pub net.Conn) (int64, time.Duration, error) {
	payload := make([]byte, o.size)
	w := bufio.NewWriterSize(pub, 64<<10)
	// A server that stops reading the publisher must not hang the run:
	// what it has not taken by then is not counted as published.
	pub.SetWriteDeadline(time.Now().Add(o.duration + 10*time.Second))
	var frame []byte
	var n int64
	start := time.Now()
	end := start.Add(o.duration)
	for now := start; now.Before(end); now = time.Now() {
		batch := 64
		if o.rate > 0 {
			due := int64(now.Sub(start).Seconds()*float64(o.rate)) - n
			if due <= 0 {
				w.Flush()
				time.Sleep(time.Millisecond)
				continue
			}
			batch = int(min(due, 64))
		}
		for range batch {
			frame = cl.publish(frame[:0], o.topic, payload)
			if _, err := w.Write(frame); errors.Is(err, os.ErrDeadlineExceeded) {
				fmt.Println("note publisher blocked: the server stopped reading it")
				return n, time.Since(start), nil
			} else if err != nil {
				return n, time.Since(start), fmt.Errorf("publisher: %w", err)
			}
			n++
		}
	}
	err := w.Flush()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		fmt.Println("note publisher blocked: the server stopped reading it")
		err = nil
	}
	return n, time.Since(start), err
}

// readDeliveries counts deliveries until the connection ends.
func readDeliveries(c net.Conn, cl client, delivered *atomic.Int64) {
	buf := make([]byte, 64<<10)
	have := 0
	for {
		n, err := c.Read(buf[have:])
		have += n
		got, used, cerr := cl.count(buf[:have])
		delivered.Add(int64(got))
		have = copy(buf, buf[used:have])
		if err != nil || cerr != nil {
			return
		}
	}
}

// privateClient speaks edgemux's private protocol (SPEC.md): 12-byte
// header with a CRC-32C, HELLO/ACK, SUB/ACK, PUB.
type privateClient struct{}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	privHello = 1
	privPub   = 2
	privSub   = 3
	privAck   = 7
)

func privFrame(dst []byte, typ byte, payload func([]byte) []byte) []byte {
	start := len(dst)
	dst = append(dst, 0xE3, 0x4D, 1, typ, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = payload(dst)
	hdr := dst[start : start+12]
	binary.BigEndian.PutUint32(hdr[4:8], uint32(len(dst)-start-12))
	crc := crc32.Update(0, castagnoli, hdr[:8])
	crc = crc32.Update(crc, castagnoli, dst[start+12:])
	binary.BigEndian.PutUint32(hdr[8:12], crc)
	return dst
}

func str16(dst []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint16(dst, uint16(len(s))), s...)
}

func (privateClient) connect(c net.Conn, id string) error {
	hello := privFrame(nil, privHello, func(b []byte) []byte { return append(str16(b, id), 0, 0, 0) })
	return privRequest(c, hello)
}

func (privateClient) subscribe(c net.Conn, topic string) error {
	sub := privFrame(nil, privSub, func(b []byte) []byte { return str16(append(b, 0, 0, 0, 1), topic) })
	return privRequest(c, sub)
}

func (privateClient) publish(dst []byte, topic string, payload []byte) []byte {
	return privFrame(dst, privPub, func(b []byte) []byte {
		b = append(b, 0, 0, 0, 0, 0) // msg id 0 (no ACK), flags
		b = str16(b, topic)
		b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0) // ts, src length (set by the server)
		return append(b, payload...)
	})
}

// privRequest writes req and waits for an ACK with status OK.
func privRequest(c net.Conn, req []byte) error {
	if _, err := c.Write(req); err != nil {
		return err
	}
	var hdr [12]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[4:8]))
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if hdr[3] != privAck || len(body) < 5 || body[4] != 0 { // msg id, status OK
		return fmt.Errorf("private: answer type %d % x", hdr[3], body)
	}
	return nil
}

func (privateClient) count(buf []byte) (n, used int, err error) {
	for len(buf)-used >= 12 {
		h := buf[used:]
		if h[0] != 0xE3 || h[1] != 0x4D {
			return n, used, errors.New("private: lost framing")
		}
		size := 12 + int(binary.BigEndian.Uint32(h[4:8]))
		if len(h) < size {
			break
		}
		if h[3] == privPub {
			n++
		}
		used += size
	}
	return n, used, nil
}

// mqttClient speaks MQTT 3.1.1 at QoS 0: CONNECT/CONNACK,
// SUBSCRIBE/SUBACK, PUBLISH.
type mqttClient struct{}

func mqttPacket(dst []byte, first byte, body []byte) []byte {
	dst = appendRemaining(append(dst, first), len(body))
	return append(dst, body...)
}

// appendRemaining appends MQTT's variable-length "remaining length".
func appendRemaining(dst []byte, n int) []byte {
	for {
		b := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(dst, b)
		}
		dst = append(dst, b|0x80)
	}
}

func (mqttClient) connect(c net.Conn, id string) error {
	body := str16(nil, "MQTT")
	body = append(body, 4, 0x02, 0, 0) // level 4, clean session, keepalive 0
	body = str16(body, id)
	return mqttRequest(c, mqttPacket(nil, 0x10, body), 0x20)
}

func (mqttClient) subscribe(c net.Conn, topic string) error {
	body := str16([]byte{0, 1}, topic)
	body = append(body, 0) // QoS 0
	return mqttRequest(c, mqttPacket(nil, 0x82, body), 0x90)
}

func (mqttClient) publish(dst []byte, topic string, payload []byte) []byte {
	dst = appendRemaining(append(dst, 0x30), 2+len(topic)+len(payload))
	dst = str16(dst, topic)
	return append(dst, payload...)
}

// mqttRequest writes req and reads one answer of type want.
func mqttRequest(c net.Conn, req []byte, want byte) error {
	if _, err := c.Write(req); err != nil {
		return err
	}
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	body := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if hdr[0]&0xf0 != want || want == 0x20 && (len(body) < 2 || body[1] != 0) || want == 0x90 && (len(body) < 3 || body[2] == 0x80) {
		return fmt.Errorf("mqtt: answer %#x % x", hdr[0], body)
	}
	return nil
}

func (mqttClient) count(buf []byte) (n, used int, err error) {
	for len(buf)-used >= 2 {
		h := buf[used:]
		size, mult, i := 0, 1, 1
		for ; i < len(h) && i <= 4; i++ {
			size += int(h[i]&0x7f) * mult
			mult <<= 7
			if h[i]&0x80 == 0 {
				break
			}
		}
		if i >= len(h) {
			break
		}
		if i > 4 {
			return n, used, errors.New("mqtt: bad remaining length")
		}
		total := i + 1 + size
		if len(h) < total {
			break
		}
		if h[0]&0xf0 == 0x30 {
			n++
		}
		used += total
	}
	return n, used, nil
}
