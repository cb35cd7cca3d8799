package coap

import (
	"bytes"
	"strings"
	"testing"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
)

// TestBadInputAnswered: each malformed or unsupported request gets
// CoAP's own answer, is counted, and leaves other peers alone.
func TestBadInputAnswered(t *testing.T) {
	tb := newTestbed(t, Config{})
	tb.publish("x", "1")
	for _, tt := range []struct {
		name string
		in   []byte
		want message.Type
		code codes.Code
	}{
		{"truncated options, CON", []byte{0x40, 0x01, 0x00, 0x10, 0xb4, 't'}, rst, codes.Empty},
		{"token length 9", []byte{0x49, 0x01, 0x00, 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 9}, rst, codes.Empty},
		{"payload marker, no payload", []byte{0x40, 0x01, 0x00, 0x12, 0xff}, rst, codes.Empty},
		{"CoAP ping", []byte{0x40, 0x00, 0x00, 0x13}, rst, codes.Empty},
		{"unknown critical option 9", msg{typ: con, code: codes.GET, mid: 0x14, path: "/t/x",
			opts: []message.Option{{ID: 9, Value: []byte{1}}}}.encode(t), ack, codes.BadOption},
		{"Proxy-Uri", msg{typ: con, code: codes.GET, mid: 0x15,
			opts: []message.Option{{ID: message.ProxyURI, Value: []byte("coap://x/")}}}.encode(t), ack, codes.ProxyingNotSupported},
		{"FETCH", msg{typ: con, code: codes.FETCH, mid: 0x16, path: "/t/x"}.encode(t), ack, codes.MethodNotAllowed},
		{"no such resource", msg{typ: con, code: codes.GET, mid: 0x17, path: "/nope"}.encode(t), ack, codes.NotFound},
		{"gateway topic", msg{typ: con, code: codes.PUT, mid: 0x18, path: "/t/$SYS/x", payload: "1"}.encode(t), ack, codes.Forbidden},
		{"bad Block2", msg{typ: con, code: codes.GET, mid: 0x19, path: "/t/x",
			opts: []message.Option{{ID: message.Block2, Value: []byte{0x0f}}}}.encode(t), ack, codes.BadOption},
		{"Accept mismatch", msg{typ: con, code: codes.GET, mid: 0x1a, path: "/t/x",
			opts: []message.Option{uintOpt(message.Accept, uint32(message.TextPlain))}}.encode(t), ack, codes.NotAcceptable},
	} {
		tb.e.Input(peerA, tt.in, tb.now)
		m := tb.one()
		if m.Type != tt.want || m.Code != tt.code {
			t.Errorf("%s: answer %v, want %v %v", tt.name, m.String(), tt.want, tt.code)
		}
	}
	if st := tb.h.Stats(); st.Malformed != 3 {
		t.Errorf("malformed %d, want 3", st.Malformed)
	}
	// A malformed NON is dropped silently (RFC 7252 section 4.3).
	tb.e.Input(peerA, []byte{0x50, 0x01, 0x00, 0x20, 0xb4, 't'}, tb.now)
	if len(tb.sent) != 0 {
		t.Errorf("a malformed NON was answered")
	}
}

// TestPublishAndDelete: PUT 2.04, POST 2.01, the value readable by GET
// (with its content format), DELETE only where coap.delete allows.
func TestPublishAndDelete(t *testing.T) {
	tb := newTestbed(t, Config{Delete: []string{"scratch/#"}})
	tb.in(peerA, msg{typ: con, code: codes.POST, mid: 1, path: "/t/scratch/a", payload: "on"})
	tb.in(peerA, msg{typ: con, code: codes.PUT, mid: 2, path: "/t/keep", payload: "\x00\x01"})
	ms := tb.out()
	if ms[0].Code != codes.Created || ms[1].Code != codes.Changed {
		t.Fatalf("POST %v, PUT %v", ms[0].Code, ms[1].Code)
	}
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 3, path: "/t/keep"})
	if m := tb.one(); !bytes.Equal(m.Payload, []byte{0, 1}) {
		t.Errorf("GET keep = % x", m.Payload)
	} else if cf, _ := m.Options.ContentFormat(); cf != message.AppOctets {
		t.Errorf("binary value served as %v", cf)
	}
	tb.in(peerA, msg{typ: con, code: codes.DELETE, mid: 4, path: "/t/keep"})
	tb.in(peerA, msg{typ: con, code: codes.DELETE, mid: 5, path: "/t/scratch/a"})
	tb.in(peerA, msg{typ: con, code: codes.DELETE, mid: 6, path: "/t/scratch/a"})
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 7, path: "/t/scratch/a"})
	var got []codes.Code
	for _, m := range tb.out() {
		got = append(got, m.Code)
	}
	want := []codes.Code{codes.MethodNotAllowed, codes.Deleted, codes.NotFound, codes.NotFound}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("DELETE keep, DELETE scratch/a twice, GET it = %v, want %v", got, want)
		}
	}
}

// TestBlockwiseBothWays: a 16 KiB body PUT in blocks of 1 KiB is
// published whole; GET serves it back block by block with Size2 and one
// ETag; a block out of order is 4.08; a body over max_body is 4.13.
func TestBlockwiseBothWays(t *testing.T) {
	tb := newTestbed(t, Config{MaxBody: 20000})
	body := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB
	for i := 0; i < 16; i++ {
		b := block{num: uint32(i), more: i < 15, szx: 6}
		tb.in(peerA, msg{typ: con, code: codes.PUT, mid: uint16(i), path: "/t/big",
			opts: []message.Option{blockOpt(message.Block1, b)}, payload: string(body[i*1024 : (i+1)*1024])})
		m := tb.one()
		want := codes.Continue
		if i == 15 {
			want = codes.Changed
		}
		if m.Code != want {
			t.Fatalf("block %d: %v, want %v", i, m.String(), want)
		}
	}
	if v, ok := tb.bus.Get("big"); !ok || !bytes.Equal(v.Payload, body) {
		t.Fatalf("published body wrong (%d bytes)", len(v.Payload))
	}
	var got []byte
	var etag []byte
	for i := 0; ; i++ {
		var opts []message.Option
		if i > 0 {
			opts = append(opts, blockOpt(message.Block2, block{num: uint32(i), szx: 6}))
		}
		tb.in(peerA, msg{typ: con, code: codes.GET, mid: uint16(100 + i), path: "/t/big", opts: opts})
		m := tb.one()
		v, err := m.Options.GetBytes(message.Block2)
		if err != nil {
			t.Fatalf("block %d without Block2: %v", i, m.String())
		}
		b, _ := parseBlock(v)
		tag, _ := m.Options.GetBytes(message.ETag)
		if i == 0 {
			etag = tag
			if size, _ := m.Options.GetUint32(message.Size2); size != uint32(len(body)) {
				t.Errorf("Size2 %d", size)
			}
		} else if !bytes.Equal(tag, etag) {
			t.Errorf("ETag changed at block %d", i)
		}
		got = append(got, m.Payload...)
		if !b.more {
			break
		}
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("GET block-wise: %d bytes back, differ", len(got))
	}
	// Out of order: block 2 after block 0.
	tb.in(peerB, msg{typ: con, code: codes.PUT, mid: 1, path: "/t/o", opts: []message.Option{blockOpt(message.Block1, block{num: 0, more: true, szx: 6})}, payload: string(body[:1024])})
	tb.in(peerB, msg{typ: con, code: codes.PUT, mid: 2, path: "/t/o", opts: []message.Option{blockOpt(message.Block1, block{num: 2, more: true, szx: 6})}, payload: string(body[:1024])})
	if ms := tb.out(); ms[1].Code != codes.RequestEntityIncomplete {
		t.Errorf("block out of order: %v", ms[1].String())
	}
	// Too large: 20 blocks of 1 KiB against max_body 20000.
	var last message.Message
	for i := 0; i < 20; i++ {
		tb.in(peerB, msg{typ: con, code: codes.PUT, mid: uint16(10 + i), path: "/t/huge", opts: []message.Option{blockOpt(message.Block1, block{num: uint32(i), more: true, szx: 6})}, payload: string(body[:1024])})
		last = tb.one()
		if last.Code != codes.Continue {
			break
		}
	}
	if last.Code != codes.RequestEntityTooLarge {
		t.Errorf("oversized body: %v", last.String())
	}
	if n := tb.h.srv.uploads.Load(); n != 0 {
		t.Errorf("%d uploads still counted", n)
	}
}

// TestObserveBlockwise: a notification larger than a block carries its
// first block with Observe; the rest comes by GET (RFC 7959 section 3.4).
func TestObserveBlockwise(t *testing.T) {
	tb := newTestbed(t, Config{BlockSize: 64})
	tb.publish("big", strings.Repeat("a", 100))
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 1, token: "o", path: "/t/big", opts: observeReg(0)})
	tb.one()
	tb.publish("big", strings.Repeat("b", 100))
	n := tb.one()
	v, err := n.Options.GetBytes(message.Block2)
	if err != nil || len(n.Payload) != 64 || !n.Options.HasOption(message.Observe) {
		t.Fatalf("notification %v", n.String())
	}
	if b, _ := parseBlock(v); b.num != 0 || !b.more {
		t.Fatalf("first block %+v", b)
	}
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 2, path: "/t/big", opts: []message.Option{blockOpt(message.Block2, block{num: 1, szx: 2})}})
	if m := tb.one(); string(m.Payload) != strings.Repeat("b", 36) {
		t.Errorf("second block %q", m.Payload)
	}
}

// TestWellKnownCore: the topics in link format, filtered by query.
func TestWellKnownCore(t *testing.T) {
	tb := newTestbed(t, Config{})
	tb.publish("plant/a", "1")
	tb.publish("plant/b", "text")
	tb.publish("$SYS/x", "1")
	mid := uint16(1000)
	get := func(queries ...string) string {
		mid++
		var opts []message.Option
		for _, q := range queries {
			opts = append(opts, message.Option{ID: message.URIQuery, Value: []byte(q)})
		}
		tb.in(peerA, msg{typ: con, code: codes.GET, mid: mid, path: "/.well-known/core", opts: opts})
		m := tb.one()
		if cf, _ := m.Options.ContentFormat(); cf != message.AppLinkFormat {
			t.Errorf("content format %v", cf)
		}
		return string(m.Payload)
	}
	all := `</t/plant/a>;rt="edgemux.topic";if="core.s";ct=50;obs,</t/plant/b>;rt="edgemux.topic";if="core.s";ct=0;obs`
	for _, tt := range []struct {
		queries []string
		want    string
	}{
		{nil, all},
		{[]string{"rt=edgemux.topic"}, all},
		{[]string{"rt=other"}, ""},
		{[]string{"ct=0"}, `</t/plant/b>;rt="edgemux.topic";if="core.s";ct=0;obs`},
		{[]string{"href=/t/plant/a*"}, `</t/plant/a>;rt="edgemux.topic";if="core.s";ct=50;obs`},
		{[]string{"obs", "if=core.*"}, all},
		{[]string{"title=x"}, ""},
	} {
		if got := get(tt.queries...); got != tt.want {
			t.Errorf("query %q:\n got %s\nwant %s", tt.queries, got, tt.want)
		}
	}
}

// TestConditionalPut: If-None-Match creates only, If-Match updates only
// an existing value, or only the one with the ETag given (RFC 7252
// section 5.10.8).
func TestConditionalPut(t *testing.T) {
	tb := newTestbed(t, Config{})
	ifNone := []message.Option{{ID: message.IfNoneMatch}}
	ifAny := []message.Option{{ID: message.IfMatch, Value: []byte{}}}
	steps := []struct {
		opts []message.Option
		want codes.Code
	}{
		{ifAny, codes.PreconditionFailed}, // nothing to update yet
		{ifNone, codes.Changed},           // created
		{ifNone, codes.PreconditionFailed},
		{ifAny, codes.Changed},
		{[]message.Option{{ID: message.IfMatch, Value: []byte("nomatch!")}}, codes.PreconditionFailed},
	}
	for i, st := range steps {
		tb.in(peerA, msg{typ: con, code: codes.PUT, mid: uint16(i), path: "/t/cond", opts: st.opts, payload: "v"})
		if m := tb.one(); m.Code != st.want {
			t.Errorf("step %d: %v, want %v", i, m.Code, st.want)
		}
	}
	v, _ := tb.bus.Get("cond")
	tb.in(peerA, msg{typ: con, code: codes.PUT, mid: 50, path: "/t/cond", opts: []message.Option{{ID: message.IfMatch, Value: etagOf(&v)}}, payload: "w"})
	if m := tb.one(); m.Code != codes.Changed {
		t.Errorf("If-Match with the current ETag: %v", m.Code)
	}
	// A GET with the current ETag is 2.03 Valid, without the value.
	v, _ = tb.bus.Get("cond")
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 51, path: "/t/cond", opts: []message.Option{{ID: message.ETag, Value: etagOf(&v)}}})
	if m := tb.one(); m.Code != codes.Valid || len(m.Payload) != 0 {
		t.Errorf("GET with the current ETag: %v", m.String())
	}
}

// TestObserveErrorEndsRegistration: a registration answered with an error
// (here a Block2 past the end) leaves no observation behind.
func TestObserveErrorEndsRegistration(t *testing.T) {
	tb := newTestbed(t, Config{})
	tb.publish("x", "1")
	opts := append(observeReg(0), blockOpt(message.Block2, block{num: 5, szx: 0}))
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 1, token: "o", path: "/t/x", opts: opts})
	if m := tb.one(); m.Code != codes.BadOption {
		t.Fatalf("answer %v, want 4.02", m.String())
	}
	if n := len(tb.e.peers[peerA].w.obs); n != 0 || tb.bus.Stats().Subscribers != 0 {
		t.Errorf("%d observations left after an error answer", n)
	}
}
