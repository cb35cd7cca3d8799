package north

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// tcpPair is a connected pair of loopback TCP sockets.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	must(t, err)
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// countingConn counts the socket calls under a batchConn; a Write can be
// held until released, to pile packets up behind it.
type countingConn struct {
	net.Conn
	reads, writes atomic.Int64
	biggest       atomic.Int64
	hold          chan struct{} // the first Write waits for it to close
	once          sync.Once
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	if int64(len(p)) > c.biggest.Load() {
		c.biggest.Store(int64(len(p)))
	}
	if c.hold != nil {
		c.once.Do(func() { <-c.hold })
	}
	return c.Conn.Write(p)
}

// TestBatchConnCoalesces: packets written while the flusher is inside a
// write leave together in the next one. The first write is held until
// 1,000 PUBLISHes are queued behind it: at most two socket writes carry
// them all, where paho alone makes 1,000.
func TestBatchConnCoalesces(t *testing.T) {
	client, server := tcpPair(t)
	cc := &countingConn{Conn: client, hold: make(chan struct{})}
	b := newBatchConn(cc, time.Minute)
	var want bytes.Buffer
	for i := range 1000 {
		p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		p.TopicName, p.Qos, p.MessageID, p.Payload = "plant/line1/temp", 1, uint16(i+1), []byte{byte(i), 1, 2, 3}
		must(t, p.Write(b))
		must(t, p.Write(&want))
	}
	close(cc.hold)
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("the broker's side received other bytes than were written")
	}
	// Two: the held one, then the rest. One when the flusher woke only
	// after all of them were queued (the scheduler's choice; seen under
	// the race detector).
	if n := cc.writes.Load(); n > 2 {
		t.Errorf("1,000 packets took %d socket writes, want at most 2 (the held one, then the rest)", n)
	}
	must(t, b.Close())
}

// TestBatchConnBackpressure writes 8 MiB of packets of random size (some
// bigger than a batch) to a peer that reads slowly in small pieces, far
// past the socket buffers: every byte arrives in order and no socket
// write is bigger than a batch plus one packet (the writer waits while a
// batch is full). The flusher's wake-up races the writer's queueing on
// every packet.
func TestBatchConnBackpressure(t *testing.T) {
	client, server := tcpPair(t)
	cc := &countingConn{Conn: client}
	b := newBatchConn(cc, time.Minute)
	const total = 8 << 20
	const biggest = maxBatch + 64<<10
	rng := rand.New(rand.NewPCG(1, 2))
	sentSum := make(chan []byte, 1) // the stream's happens-before is not the race detector's
	go func() {
		sent := sha256.New()
		defer func() { sentSum <- sent.Sum(nil) }()
		buf := make([]byte, biggest)
		for n := 0; n < total; {
			size := 1 + rng.IntN(2048)
			switch rng.IntN(100) {
			case 0:
				size = biggest
			case 1, 2, 3:
				size = 1 + rng.IntN(64<<10)
			}
			p := buf[:size]
			for i := range p {
				p[i] = byte(n + i)
			}
			if _, err := b.Write(p); err != nil {
				t.Error(err)
				return
			}
			sent.Write(p)
			n += size
		}
		b.Close()
	}()
	got := sha256.New()
	piece := make([]byte, 3000)
	var n int
	for {
		k, err := server.Read(piece)
		got.Write(piece[:k])
		n += k
		if n%(1<<20) < k {
			time.Sleep(20 * time.Millisecond) // a slow reader now and then: the batch fills
		}
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
	}
	if !bytes.Equal(got.Sum(nil), <-sentSum) {
		t.Fatalf("received %d bytes that differ from what was written", n)
	}
	if w := cc.biggest.Load(); w > maxBatch+biggest {
		t.Errorf("a socket write of %d bytes, want at most a batch (%d) plus one packet (%d)", w, maxBatch, biggest)
	}
	t.Logf("%d bytes in %d socket writes", n, cc.writes.Load())
}

// TestBatchConnWriteTimeout: a broker that takes nothing fails the writes
// once a batch has waited its timeout, and the connection closes, so
// paho's reader sees it too.
func TestBatchConnWriteTimeout(t *testing.T) {
	client, _ := tcpPair(t)
	b := newBatchConn(client, 100*time.Millisecond)
	p := make([]byte, 32<<10)
	var err error
	for err == nil {
		_, err = b.Write(p)
	}
	if !errors.Is(err, errWriteTimeout) {
		t.Fatalf("write error %v, want %v", err, errWriteTimeout)
	}
	if _, err := b.Read(make([]byte, 1)); err == nil {
		t.Fatal("the reader did not see the connection close")
	}
	b.Close()
}

// TestBatchConnCloseFlushes: what is queued when paho closes (its
// DISCONNECT) reaches the peer before the end of the stream.
func TestBatchConnCloseFlushes(t *testing.T) {
	client, server := tcpPair(t)
	cc := &countingConn{Conn: client, hold: make(chan struct{})}
	b := newBatchConn(cc, time.Minute)
	var want bytes.Buffer
	for _, p := range []packets.ControlPacket{packets.NewControlPacket(packets.Pingreq), packets.NewControlPacket(packets.Disconnect)} {
		must(t, p.Write(b))
		must(t, p.Write(&want))
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	close(cc.hold)
	got, err := io.ReadAll(server)
	must(t, err)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("peer read %x before the end, want %x", got, want.Bytes())
	}
	must(t, <-closed)
	if _, err := b.Write([]byte{0}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want %v", err, net.ErrClosed)
	}
}

// TestBatchConnReadsBuffered: 1,000 PUBACKs that arrive together are read
// with a socket read or two; paho reading the socket itself makes three
// per PUBACK (its first byte, its length byte, its body).
func TestBatchConnReadsBuffered(t *testing.T) {
	client, server := tcpPair(t)
	cc := &countingConn{Conn: client}
	b := newBatchConn(cc, time.Minute)
	defer b.Close()
	var acks bytes.Buffer
	for i := range 1000 {
		a := packets.NewControlPacket(packets.Puback).(*packets.PubackPacket)
		a.MessageID = uint16(i + 1)
		must(t, a.Write(&acks))
	}
	_, err := server.Write(acks.Bytes())
	must(t, err)
	for i := range 1000 {
		cp, err := packets.ReadPacket(b)
		must(t, err)
		if a, ok := cp.(*packets.PubackPacket); !ok || a.MessageID != uint16(i+1) {
			t.Fatalf("packet %d: %v, want PUBACK %d", i, cp, i+1)
		}
	}
	if n := cc.reads.Load(); n > 4 {
		t.Errorf("1,000 PUBACKs took %d socket reads, want at most 4", n)
	}
}
