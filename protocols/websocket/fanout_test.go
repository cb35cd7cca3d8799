package websocket

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// One publish to three subscribers is encoded to JSON once: the three
// get the same text frame, Encoded counts 1 and Delivered 3. A retained
// replay is encoded for its subscriber, marked retained. With the sharing
// taken out of deliveryText, Encoded counts 3. Each delivery is written
// with its text shared.
func TestFanOutEncodesOnce(t *testing.T) {
	h := New(config.WebSocket{}, bus.New(bus.Options{}), nil)
	var subs []*offline
	for range 3 {
		o := newOffline(t, h)
		o.send(`{"op":"sub","topic":"plant/#","retained":true}`)
		o.frames(t)
		subs = append(subs, o)
	}
	if err := h.bus.Publish("plant/1/temp", []byte(`{"v":21.5}`), "modbus"); err != nil {
		t.Fatal(err)
	}
	want := `{"topic":"plant/1/temp","data":{"v":21.5},"ts":`
	for i, o := range subs {
		if err := o.sess.(protocols.Notified).Notified(); err != nil {
			t.Fatal(err)
		}
		fs := o.frames(t)
		if len(fs) != 1 || fs[0].op != OpText || len(fs[0].payload) < len(want) || fs[0].payload[:len(want)] != want {
			t.Fatalf("subscriber %d got %+v", i, fs)
		}
		if o.conn.shared != 1 { // the shared text goes by reference (protocols.SharedWriter)
			t.Fatalf("subscriber %d: %d shared writes, want 1", i, o.conn.shared)
		}
	}
	if st := h.Stats(); st.Encoded != 1 || st.Delivered != 3 {
		t.Fatalf("encoded %d, delivered %d; want 1 and 3", st.Encoded, st.Delivered)
	}
	late := newOffline(t, h)
	late.send(`{"op":"sub","topic":"plant/#","retained":true}`)
	late.frames(t)
	if err := late.sess.(protocols.Notified).Notified(); err != nil {
		t.Fatal(err)
	}
	if fs := late.frames(t); len(fs) != 1 || !strings.Contains(fs[0].payload, `"retained":true`) {
		t.Fatalf("retained replay: %+v", fs)
	}
	if st := h.Stats(); st.Encoded != 2 || st.Delivered != 4 {
		t.Fatalf("after the replay: encoded %d, delivered %d; want 2 and 4", st.Encoded, st.Delivered)
	}
}

// BenchmarkFanOut delivers each publish to n sessions: ns and allocations
// per delivery.
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			h := New(config.WebSocket{}, bus.New(bus.Options{MaxSubscribers: n}), nil)
			subs := make([]*offline, n)
			for i := range subs {
				subs[i] = newOffline(b, h)
				subs[i].send(`{"op":"sub","topic":"plant/#"}`)
				subs[i].conn.out = subs[i].conn.out[:0]
			}
			payload := []byte(`{"v":21.5,"unit":"C","quality":"good","seq":123456}`)
			b.ReportAllocs()
			for b.Loop() {
				_ = h.bus.Publish("plant/1/temp", payload, "modbus")
				for _, o := range subs {
					if err := o.sess.(protocols.Notified).Notified(); err != nil {
						b.Fatal(err)
					}
					o.conn.out = o.conn.out[:0]
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
		})
	}
}
