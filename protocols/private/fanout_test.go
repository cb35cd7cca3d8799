package private

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// One publish to three subscribers is encoded once: the three get the
// same, valid PUB frame (CRC checked by frames), Encoded counts 1 and
// Delivered 3. A retained replay is encoded for its subscriber, flagged.
// With the sharing taken out of appendDelivery, Encoded counts 3. Each
// delivery is written as a shared frame.
func TestFanOutEncodesOnce(t *testing.T) {
	b := newBus(bus.Options{})
	h := New(config.Private{}, b, nil)
	var subs []*testSession
	for range 3 {
		ts := openSession(t, h)
		ts.hello()
		if err := ts.feed(subFrame(TypeSub, 0, "plant/#")); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, ts)
	}
	if err := b.Publish("plant/1/temp", []byte("21.5"), "modbus"); err != nil {
		t.Fatal(err)
	}
	var first []byte
	for i, ts := range subs {
		if err := ts.sess.(protocols.Notified).Notified(); err != nil {
			t.Fatal(err)
		}
		raw := bytes.Clone(ts.conn.out.Bytes())
		fs := ts.conn.frames(t)
		p, err := DecodePub(fs[0].Payload)
		if len(fs) != 1 || err != nil || string(p.Topic) != "plant/1/temp" || string(p.Data) != "21.5" || p.Flags != 0 {
			t.Fatalf("subscriber %d got %v: %+v, %v", i, types(fs), p, err)
		}
		if i == 0 {
			first = raw
		} else if !bytes.Equal(raw, first) {
			t.Fatalf("subscriber %d got other bytes than subscriber 0", i)
		}
		if ts.conn.shared != 1 { // the shared frame goes by reference (protocols.SharedWriter)
			t.Fatalf("subscriber %d: %d shared writes, want 1", i, ts.conn.shared)
		}
	}
	if st := h.Stats(); st.Encoded != 1 || st.Delivered != 3 {
		t.Fatalf("encoded %d, delivered %d; want 1 and 3", st.Encoded, st.Delivered)
	}
	late := openSession(t, h)
	late.hello()
	if err := late.feed(subFrame(TypeSub, 0, "plant/#")); err != nil {
		t.Fatal(err)
	}
	got, err := late.deliveries()
	if err != nil || len(got) != 1 || got[0].Flags&PubRetained == 0 {
		t.Fatalf("retained replay: %+v, %v", got, err)
	}
	if st := h.Stats(); st.Encoded != 2 || st.Delivered != 4 {
		t.Fatalf("after the replay: encoded %d, delivered %d; want 2 and 4", st.Encoded, st.Delivered)
	}
}

// A message that cannot be framed (a source name past the PUB frame's 255
// bytes) is skipped and not counted as delivered; the one after it is
// delivered in the same batch, and counted.
func TestUnencodableDeliverySkipped(t *testing.T) {
	b := newBus(bus.Options{})
	h := New(config.Private{}, b, nil)
	ts := openSession(t, h)
	ts.hello()
	if err := ts.feed(subFrame(TypeSub, 0, "plant/#")); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish("plant/1/temp", []byte("21.5"), string(bytes.Repeat([]byte{'s'}, 300))); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish("plant/2/temp", []byte("22.5"), "modbus"); err != nil {
		t.Fatal(err)
	}
	got, err := ts.deliveries()
	if err != nil || len(got) != 1 || string(got[0].Topic) != "plant/2/temp" {
		t.Fatalf("deliveries: %+v, %v; want plant/2/temp alone", got, err)
	}
	if st := h.Stats(); st.Delivered != 1 {
		t.Fatalf("delivered %d, want 1", st.Delivered)
	}
}

// fanOutSessions opens n sessions on a bus of their own, each said HELLO
// and subscribed to "plant/#", their output emptied.
func fanOutSessions(b *testing.B, n int) (*bus.Bus, []*fakeConn, []protocols.Notified) {
	bb := newBus(bus.Options{MaxSubscribers: n})
	h := New(config.Private{}, bb, nil)
	conns := make([]*fakeConn, n)
	sess := make([]protocols.Notified, n)
	for i := range n {
		conns[i] = &fakeConn{}
		s, _ := h.Open(conns[i])
		if _, err := s.Data(append(helloFrame("d"), subFrame(TypeSub, 0, "plant/#")...)); err != nil {
			b.Fatal(err)
		}
		sess[i] = s.(protocols.Notified)
		conns[i].out.Reset()
	}
	return bb, conns, sess
}

// BenchmarkFanOut delivers each publish to n sessions, as a worker does
// after one publish: ns and allocations per delivery.
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			bb, conns, sess := fanOutSessions(b, n)
			payload := bytes.Repeat([]byte("x"), 64)
			b.ReportAllocs()
			for b.Loop() {
				_ = bb.Publish("plant/1/temp", payload, "modbus")
				for i, s := range sess {
					if err := s.Notified(); err != nil {
						b.Fatal(err)
					}
					conns[i].out.Reset()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
		})
	}
}

// BenchmarkFanOutTwoWorkers is BenchmarkFanOut's 1,000 subscribers split
// between two goroutines that deliver at once, as two workers do: what
// their sessions share (the handler's counters, the messages' shared
// frames) is written from both cores.
func BenchmarkFanOutTwoWorkers(b *testing.B) {
	const n = 1000
	bb, conns, sess := fanOutSessions(b, n)
	payload := bytes.Repeat([]byte("x"), 64)
	start := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var done sync.WaitGroup
	for w := range 2 {
		go func() {
			for range start[w] {
				for i := w; i < n; i += 2 {
					if err := sess[i].Notified(); err != nil {
						b.Error(err)
					}
					conns[i].out.Reset()
				}
				done.Done()
			}
		}()
	}
	b.ReportAllocs()
	for b.Loop() { // eight publishes, then both workers deliver their halves
		for range 8 {
			if err := bb.Publish("plant/1/temp", payload, "modbus"); err != nil {
				b.Fatal(err)
			}
		}
		done.Add(2)
		start[0] <- struct{}{}
		start[1] <- struct{}{}
		done.Wait()
	}
	close(start[0])
	close(start[1])
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n*8), "ns/delivery")
}
