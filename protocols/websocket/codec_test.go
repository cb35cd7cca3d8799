package websocket

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

var headerEndCases = []struct {
	in   string
	want int
}{
	{"", 0},
	{"GET / HTTP/1.1\r\n", 0},
	{"GET / HTTP/1.1\r\nHost: x\r\n\r", 0},
	{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27},
	{"GET / HTTP/1.1\r\nHost: x\r\n\r\nrest", 27},
	{"GET / HTTP/1.1\nHost: x\n\n", 24},
	{"GET / HTTP/1.1\r\nHost: x\n\r\n", 26},
	{"\r\n\r\n", 4},
	{"\n\n", 2},
	{"a\rb\r\n\rc\r\n\r\n", 11},
}

func TestHeaderEnd(t *testing.T) {
	for _, tt := range headerEndCases {
		if got := headerEnd([]byte(tt.in)); got != tt.want {
			t.Errorf("headerEnd(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// FuzzHandshake: any bytes before the upgrade, in any cuts, end in an
// upgrade, an HTTP answer and a close, or a wait for more; never a panic,
// and never more consumed than given.
func FuzzHandshake(f *testing.F) {
	for _, tt := range headerEndCases {
		f.Add([]byte(tt.in), uint8(0))
	}
	f.Add([]byte(upgradeRequest("/ws")), uint8(7))
	f.Add([]byte(upgradeRequest("/ws", "Origin: http://x\r\n")), uint8(3))
	f.Add(append([]byte(upgradeRequest("/ws")), clientFrame(finText, []byte(`{"op":"ping"}`))...), uint8(1))
	h := New(config.WebSocket{MaxHeaderBytes: 1024}, bus.New(bus.Options{}), nil)
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		c := newFakeConn()
		sess, _ := h.Open(c)
		c.sess = sess
		fd := feeder{conn: c, sess: sess}
		step := int(cut) + 1
		for i := 0; i < len(data) && !c.closed; i += step {
			fd.feed(data[i:min(i+step, len(data))])
		}
		out := string(c.out)
		switch {
		case strings.HasPrefix(out, "HTTP/1.1 101 "):
		case c.closed && !strings.HasPrefix(out, "HTTP/1.1 "):
			t.Fatalf("closed (%v) without an HTTP answer: %q", c.reason, out)
		case !c.closed && out != "":
			t.Fatalf("answered %q without closing", out)
		}
		if !c.closed && !sess.(*session).upgraded && len(fd.pending) > 1024 {
			t.Fatalf("holding %d header bytes past the limit", len(fd.pending))
		}
	})
}

// FuzzRequest: any message on an upgraded connection gets a valid JSON
// reply or none, or closes with a close frame; never a panic.
func FuzzRequest(f *testing.F) {
	for _, m := range []string{`{"op":"ping"}`, `{"op":"sub","topic":"a/+"}`, `{"op":"pub","topic":"a/b","data":{"x":[1,2]}}`,
		`{"op":"unsub","topic":"#"}`, `{"op":"sub","topic":"a","retained":false}`, `{"op":1}`, `null`, "\xff"} {
		f.Add([]byte(m), false)
	}
	b := bus.New(bus.Options{MaxPayload: 256})
	h := New(config.WebSocket{MaxSubs: 4}, b, nil)
	f.Fuzz(func(t *testing.T, msg []byte, binary bool) {
		o := newOffline(t, h)
		defer o.conn.Close(protocols.ErrShutdown)
		first := finText
		if binary {
			first = finBinary
		}
		o.feed(clientFrame(first, msg))
		b.Publish("a/b", msg, "private")
		o.notified()
		for _, fr := range o.frames(t) {
			switch fr.op {
			case OpText:
				if !json.Valid([]byte(fr.payload)) {
					t.Fatalf("invalid JSON sent: %q", fr.payload)
				}
			case OpClose:
				if !o.conn.closed {
					t.Fatal("close frame without closing")
				}
			default:
				t.Fatalf("unexpected frame %+v", fr)
			}
		}
	})
}

// jsonStringCases are checked against encoding/json (HTML escaping off).
var jsonStringCases = []string{
	"", "plain", `quote " and \ backslash`, "tab\tnl\ncr\r", "\b\f\x00\x1f\x7f",
	"é ü 温度 🌡", "bad \xff utf8 \xe2\x82", "line\u2028para\u2029", "<html>&amp;",
}

func marshalNoHTML(t testing.TB, s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range jsonStringCases {
		want := marshalNoHTML(t, s)
		if got := string(appendJSONString(nil, s)); got != want {
			t.Errorf("string %q: got %s, want %s", s, got, want)
		}
		if got := string(appendJSONString(nil, []byte(s))); got != want {
			t.Errorf("bytes %q: got %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStringCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendJSONString(nil, s)), marshalNoHTML(t, s); got != want {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

func TestAppendDelivery(t *testing.T) {
	tests := []struct {
		m    bus.Message
		want string
	}{
		{bus.Message{Topic: "a/b", Payload: []byte(`{"v":1}`), Src: "modbus", TS: 1700000000123456789},
			`{"topic":"a/b","data":{"v":1},"ts":1700000000123,"src":"modbus"}`},
		{bus.Message{Topic: "a", Payload: []byte("21.5"), Src: "coap", TS: 2e6, Retained: true},
			`{"topic":"a","data":21.5,"ts":2,"src":"coap","retained":true}`},
		{bus.Message{Topic: `q"t`, Payload: []byte("raw\x00"), Src: "private"},
			`{"topic":"q\"t","data":"raw\u0000","ts":0,"src":"private"}`},
		{bus.Message{Topic: "e", Src: "ws"}, `{"topic":"e","data":"","ts":0,"src":"ws"}`},
	}
	for _, tt := range tests {
		got := string(appendDelivery(nil, &tt.m))
		if got != tt.want || !json.Valid([]byte(got)) {
			t.Errorf("appendDelivery(%+v) = %s, want %s", tt.m, got, tt.want)
		}
	}
}

func TestAppendDeliveryAllocs(t *testing.T) {
	m := bus.Message{Topic: "plant/1/temp", Payload: []byte(`{"v":21.5}`), Src: "modbus", TS: 1}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = appendDelivery(buf[:0], &m) }); n != 0 {
		t.Errorf("appendDelivery allocates %v times", n)
	}
}

func TestCloseReason(t *testing.T) {
	long := errors.New("websocket: " + strings.Repeat("é", 100))
	r := closeReason(long)
	if len(r) > MaxControlPayload-2 || !utf8.ValidString(r) || strings.HasPrefix(r, "websocket:") {
		t.Errorf("closeReason = %q (%d bytes)", r, len(r))
	}
	if r := closeReason(ErrProtocol); r != "protocol error" {
		t.Errorf("closeReason = %q", r)
	}
}

func TestValidCloseCode(t *testing.T) {
	for code, want := range map[uint16]bool{999: false, 1000: true, 1003: true, 1004: false, 1005: false, 1006: false,
		1007: true, 1011: true, 1014: true, 1015: false, 2999: false, 3000: true, 4999: true, 5000: false} {
		if validCloseCode(code) != want {
			t.Errorf("validCloseCode(%d) = %v", code, !want)
		}
	}
}

func TestLeaseIsTheWire(t *testing.T) {
	s := &session{conn: newFakeConn()}
	l := &lease{s: s}
	if _, err := l.Read(make([]byte, 4)); !errors.Is(err, errNoInput) {
		t.Errorf("Read with nothing buffered = %v", err)
	}
	l.feed = []byte("abcdef")
	p := make([]byte, 4)
	if n, err := l.Read(p); n != 4 || err != nil || string(p) != "abcd" || string(l.feed) != "ef" {
		t.Errorf("Read = %d, %v, %q; left %q", n, err, p, l.feed)
	}
	if n, err := l.Write([]byte("xy")); n != 2 || err != nil || string(l.out) != "xy" {
		t.Errorf("Write = %d, %v; staged %q", n, err, l.out)
	}
	if l.SetDeadline(time.Now()) != nil || l.SetReadDeadline(time.Now()) != nil || l.SetWriteDeadline(time.Now()) != nil {
		t.Error("deadlines are no-ops")
	}
	if got := l.RemoteAddr().String(); got != "127.0.0.1:40000" {
		t.Errorf("RemoteAddr = %s", got)
	}
	if _, ok := l.LocalAddr().(*net.TCPAddr); !ok {
		t.Error("LocalAddr is not a TCP address")
	}
	if l.Close() != nil || !s.closing {
		t.Error("Close does not mark the session closing")
	}
}

// TestPanicIsContained: a panic while a session delivers closes its
// connection with ErrPanic, after a close 1011, and is logged with its
// stack.
func TestPanicIsContained(t *testing.T) {
	var logs bytes.Buffer
	h := New(config.WebSocket{}, bus.New(bus.Options{}), slog.New(slog.NewJSONHandler(&logs, nil)))
	h.bus.Publish("p", []byte("1"), "private") // the sub's replay calls Notify
	o := newOffline(t, h)
	o.conn.panicOnNotify = true
	o.send(`{"op":"sub","topic":"p"}`)
	if !o.conn.closed || !errors.Is(o.conn.reason, ErrPanic) {
		t.Fatalf("closed=%v reason=%v", o.conn.closed, o.conn.reason)
	}
	if s := o.sess.(*session); s.sub != nil || s.l != nil {
		t.Error("a panicked session kept its subscriber or staging buffer")
	}
	// The peer is told, in WebSocket's words: its last frame is a close,
	// 1011 (internal error).
	fs := o.frames(t)
	if len(fs) == 0 || fs[len(fs)-1].op != OpClose || len(fs[len(fs)-1].payload) < 2 ||
		int(fs[len(fs)-1].payload[0])<<8|int(fs[len(fs)-1].payload[1]) != CloseInternal {
		t.Fatalf("peer got %+v, want a close 1011 last", fs)
	}
	checkPanicLogged(t, &logs, "notify exploded", "(*fakeConn).Notify")
}

// TestPanicBeforeTheUpgradeIsAnswered: a panic in the call that would
// have upgraded (the 101 staged, never sent) is answered in HTTP's words,
// a 500, not with a close frame the peer cannot expect yet; it is logged
// all the same.
func TestPanicBeforeTheUpgradeIsAnswered(t *testing.T) {
	var logs bytes.Buffer
	h := New(config.WebSocket{}, bus.New(bus.Options{}), slog.New(slog.NewJSONHandler(&logs, nil)))
	c := newFakeConn()
	sess, err := h.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	c.panicOnTimer = true // the upgrade sets the keepalive timer
	f := feeder{conn: c, sess: sess}
	f.feed([]byte(upgradeRequest("/ws")))
	if !c.closed || !errors.Is(c.reason, ErrPanic) {
		t.Fatalf("closed=%v reason=%v", c.closed, c.reason)
	}
	if !strings.HasPrefix(string(c.out), "HTTP/1.1 500 ") {
		t.Fatalf("peer got %q, want a 500", c.out)
	}
	checkPanicLogged(t, &logs, "timer exploded", "(*fakeConn).SetTimer")
}

// checkPanicLogged checks that logs (a Handler's, as JSON lines) hold the
// panic once, as the private protocol logs its own: at error level, with
// the connection, the panic's value, and a stack that reaches the frame
// that panicked (where), since the value alone does not find the bug.
func checkPanicLogged(t *testing.T, logs *bytes.Buffer, value, where string) {
	t.Helper()
	var panics []map[string]any
	for line := range bytes.Lines(logs.Bytes()) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "session panic" {
			panics = append(panics, rec)
		}
	}
	if len(panics) != 1 {
		t.Fatalf("logged %d session panics, want 1; the log:\n%s", len(panics), logs)
	}
	rec := panics[0]
	stack, _ := rec["stack"].(string)
	if rec["level"] != "ERROR" || rec["component"] != "websocket" || rec["conn"] != float64(1) || rec["panic"] != value {
		t.Errorf("logged %v, want level ERROR, component websocket, conn 1, panic %q", rec, value)
	}
	if !strings.Contains(stack, where) {
		t.Errorf("the logged stack does not reach %s:\n%s", where, stack)
	}
}

func TestWithDefaults(t *testing.T) {
	got := withDefaults(config.WebSocket{MaxHeaderBytes: 1 << 30, SlowConsumer: "bogus", MissedPongs: 1000})
	if got.Path != DefaultPath || got.Subprotocol != DefaultSubprotocol || got.MaxHeaderBytes != MaxHeaderBytesCap ||
		got.SlowConsumer != "close" || got.MissedPongs != 255 || got.PingInterval != DefaultPingInterval ||
		got.HandshakeTimeout != DefaultHandshakeTimeout || got.MaxMessage != DefaultMaxMessage || got.MaxSubs != DefaultMaxSubs {
		t.Errorf("withDefaults = %+v", got)
	}
	if c := config.Defaults().WebSocket; !equalWS(withDefaults(config.WebSocket{}), c) {
		t.Errorf("package defaults %+v differ from config.Defaults %+v", withDefaults(config.WebSocket{}), c)
	}
}

func equalWS(a, b config.WebSocket) bool {
	a.AllowedOrigins, b.AllowedOrigins = nil, nil
	return reflect.DeepEqual(a, b)
}
