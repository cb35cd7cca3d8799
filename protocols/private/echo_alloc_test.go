package private

import (
	"bytes"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// TestEchoAllocs pins what a PUB to the publisher's own subscription
// costs, the echo of examples/bench/echocompare: nothing. A lone subscriber's delivery is encoded into
// the session's pooled output; it was encoded into an exact-size array to
// share with no one, stored on the message behind a pointer (5
// allocations and 2,345 bytes per echo of a 1 KiB PUB before the bus
// stopped sharing messages with one reader, 3 and 1,136 after). The topic
// is published in the frame's bytes, under the cache's string
// (bus.PublishBytes): it was a string per PUB (2 and 1,120 since). The
// bus recycles a lone subscriber's message once drained: it was one per
// PUB (1 and 1,024 since). The payload is copied into a pooled buffer
// that the session releases once framed (bus.Subscriber.Recycle): it was
// an array per PUB (0 since).
func TestEchoAllocs(t *testing.T) {
	if raceBuild {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	h := New(config.Private{}, newBus(bus.Options{}), nil)
	ts := openSession(t, h)
	ts.hello()
	if err := ts.feed(subFrame(TypeSub, 1, "echo/1024/0")); err != nil {
		t.Fatal(err)
	}
	ts.expectAck(1, CodeOK)
	frame := must(AppendPub(nil, Pub{Topic: []byte("echo/1024/0"), Data: bytes.Repeat([]byte{'x'}, 1000)}))
	n := ts.sess.(protocols.Notified)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := ts.sess.Data(frame); err != nil {
			t.Fatal(err)
		}
		if err := n.Notified(); err != nil {
			t.Fatal(err)
		}
		ts.conn.out.Reset()
	})
	if allocs > 0 {
		t.Fatalf("%v allocations per echoed PUB, want none", allocs)
	}
}

// BenchmarkEcho is TestEchoAllocs' echo timed, the user-space work of one
// echocompare request in this package and the bus (no socket: the output
// goes to a buffer): a PUB of size bytes parsed and published, the
// delivery drained, framed and written.
func BenchmarkEcho(b *testing.B) {
	for _, size := range []int{64, 1024} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			h := New(config.Private{}, newBus(bus.Options{}), nil)
			c := &fakeConn{}
			s, _ := h.Open(c)
			topic := "echo/" + strconv.Itoa(size) + "/0"
			if _, err := s.Data(append(helloFrame("d"), subFrame(TypeSub, 0, topic)...)); err != nil {
				b.Fatal(err)
			}
			head := must(AppendPub(nil, Pub{Topic: []byte(topic)}))
			frame := must(AppendPub(nil, Pub{Topic: []byte(topic), Data: make([]byte, size-len(head))}))
			n := s.(protocols.Notified)
			c.out.Reset()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Data(frame); err != nil {
					b.Fatal(err)
				}
				if err := n.Notified(); err != nil {
					b.Fatal(err)
				}
				if c.out.Len() != len(frame)+len(Source) {
					b.Fatalf("echo of %d bytes, want %d", c.out.Len(), len(frame)+len(Source))
				}
				c.out.Reset()
			}
		})
	}
}

// BenchmarkEchoParallel is BenchmarkEcho on every P at once, each
// goroutine a session of its own echoing on its own topic, as the
// gateway's workers do: what they share (the bus's locks and counters,
// the handler's counters) is what it measures, beside the echo's own work.
// Run with -cpu 1,2 to see the cost of sharing.
func BenchmarkEchoParallel(b *testing.B) {
	h := New(config.Private{}, newBus(bus.Options{}), nil)
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := &fakeConn{}
		s, _ := h.Open(c)
		topic := "echo/64/" + strconv.Itoa(int(next.Add(1)))
		if _, err := s.Data(append(helloFrame("d"+topic), subFrame(TypeSub, 0, topic)...)); err != nil {
			b.Error(err)
			return
		}
		head := must(AppendPub(nil, Pub{Topic: []byte(topic)}))
		frame := must(AppendPub(nil, Pub{Topic: []byte(topic), Data: make([]byte, 64-len(head))}))
		n := s.(protocols.Notified)
		c.out.Reset()
		for pb.Next() {
			if _, err := s.Data(frame); err != nil {
				b.Error(err)
				return
			}
			if err := n.Notified(); err != nil {
				b.Error(err)
				return
			}
			if c.out.Len() != len(frame)+len(Source) {
				b.Errorf("echo of %d bytes, want %d", c.out.Len(), len(frame)+len(Source))
				return
			}
			c.out.Reset()
		}
	})
}

// BenchmarkEchoSessions is BenchmarkEcho's 64-byte echo taken in turn by
// many sessions, each on a topic of its own, as echocompare's 1,000
// active connections do: what the live echo costs beyond the one hot
// session of BenchmarkEcho is the memory each request touches that the
// previous requests did not (sessions, subscribers, the topic tree and
// the cache).
func BenchmarkEchoSessions(b *testing.B) {
	for _, n := range []int{1, 1000, 10000} {
		b.Run("sessions="+strconv.Itoa(n), func(b *testing.B) {
			h := New(config.Private{}, newBus(bus.Options{MaxTopics: 2 * n}), nil)
			type echoer struct {
				c     *fakeConn
				s     protocols.Session
				frame []byte
			}
			es := make([]echoer, n)
			for i := range es {
				c := &fakeConn{}
				s, _ := h.Open(c)
				topic := "echo/64/" + strconv.Itoa(i)
				if _, err := s.Data(append(helloFrame("d"+topic), subFrame(TypeSub, 0, topic)...)); err != nil {
					b.Fatal(err)
				}
				head := must(AppendPub(nil, Pub{Topic: []byte(topic)}))
				es[i] = echoer{c, s, must(AppendPub(nil, Pub{Topic: []byte(topic), Data: make([]byte, 64-len(head))}))}
				c.out.Reset()
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e := &es[i]
				if _, err := e.s.Data(e.frame); err != nil {
					b.Fatal(err)
				}
				if err := e.s.(protocols.Notified).Notified(); err != nil {
					b.Fatal(err)
				}
				if e.c.out.Len() != len(e.frame)+len(Source) {
					b.Fatalf("echo of %d bytes, want %d", e.c.out.Len(), len(e.frame)+len(Source))
				}
				e.c.out.Reset()
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}
