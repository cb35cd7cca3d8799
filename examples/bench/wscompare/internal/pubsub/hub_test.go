package pubsub

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

type rec struct {
	got map[int][]string
}

func (r *rec) deliver(s int, b []byte) { r.got[s] = append(r.got[s], string(b)) }

func now() int64 { return 7 }

func TestHubApply(t *testing.T) {
	h := NewHub[int]()
	r := &rec{got: map[int][]string{}}
	var f1, f2 []string
	steps := []struct {
		who     int
		filters *[]string
		msg     string
		reply   string // substring of the reply; "" = none
	}{
		{1, &f1, `{"op":"sub","topic":"a/#"}`, ""},
		{1, &f1, `{"op":"sub","topic":"a/#"}`, ""}, // again: no duplicate
		{2, &f2, `{"op":"sub","topic":"a/+"}`, ""},
		{2, &f2, `{"op":"pub","topic":"a/b","data":1}`, ""},
		{2, &f2, `{"op":"pub","topic":"a/b/c","data":2}`, ""},
		{1, &f1, `{"op":"unsub","topic":"a/#"}`, ""},
		{2, &f2, `{"op":"pub","topic":"a/x","data":3}`, ""},
		{1, &f1, `{"op":"pub","topic":"a/+","data":3}`, `"code":400`},
		{1, &f1, `nonsense`, `"op":"error"`},
	}
	for i, st := range steps {
		reply := h.Apply(st.who, st.filters, []byte(st.msg), now, r.deliver)
		if st.reply == "" && reply != nil || st.reply != "" && !strings.Contains(string(reply), st.reply) {
			t.Fatalf("step %d: reply %s, want %q", i, reply, st.reply)
		}
	}
	want1 := []string{`{"topic":"a/b","data":1,"ts":7,"src":"websocket"}`, `{"topic":"a/b/c","data":2,"ts":7,"src":"websocket"}`}
	want2 := []string{`{"topic":"a/b","data":1,"ts":7,"src":"websocket"}`, `{"topic":"a/x","data":3,"ts":7,"src":"websocket"}`}
	if fmt.Sprint(r.got[1]) != fmt.Sprint(want1) || fmt.Sprint(r.got[2]) != fmt.Sprint(want2) {
		t.Fatalf("got %v", r.got)
	}
	if len(f1) != 0 || len(f2) != 1 || h.Len() != 1 {
		t.Fatalf("filters %q %q, hub len %d", f1, f2, h.Len())
	}
	h.RemoveAll(f2, 2)
	if h.Len() != 0 || len(h.filters) != 0 {
		t.Fatalf("hub not empty after RemoveAll: %v", h.filters)
	}
}

func TestHubMaxSubs(t *testing.T) {
	h := NewHub[int]()
	var filters []string
	for i := range MaxSubs {
		if r := h.Apply(1, &filters, fmt.Appendf(nil, `{"op":"sub","topic":"t/%d"}`, i), now, nil); r != nil {
			t.Fatalf("sub %d: %s", i, r)
		}
	}
	r := h.Apply(1, &filters, []byte(`{"op":"sub","topic":"one/more"}`), now, nil)
	if !strings.Contains(string(r), `"code":429`) {
		t.Fatalf("sub past MaxSubs: %s", r)
	}
	if err := h.Subscribe("x", 2, MaxSubs); !errors.Is(err, ErrTooManySubs) {
		t.Fatalf("Subscribe past MaxSubs: %v", err)
	}
}

func newFanoutHub(n int) *Hub[int] {
	h := NewHub[int]()
	for i := range n {
		h.Subscribe("bench/#", i, 0)
	}
	h.Subscribe("other/+", -1, 0)
	return h
}

func TestHubPublishAllocs(t *testing.T) {
	h := newFanoutHub(1000)
	count := 0
	deliver := func(int) { count++ }
	if n := testing.AllocsPerRun(20, func() { h.Publish("bench/fan", deliver) }); n != 0 {
		t.Fatalf("Publish allocates %.0f times", n)
	}
	if count != 21*1000 {
		t.Fatalf("delivered %d", count)
	}
}

func BenchmarkHubPublish10k(b *testing.B) {
	h := newFanoutHub(10000)
	count := 0
	deliver := func(int) { count++ }
	b.ReportAllocs()
	for b.Loop() {
		h.Publish("bench/fan", deliver)
	}
	b.ReportMetric(float64(count)/b.Elapsed().Seconds(), "deliveries/s")
}
