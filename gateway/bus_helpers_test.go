package gateway

// Helpers for the bus tests (bus_test.go, buscache_test.go): a buffered
// reader of private frames fast enough for 100,000 deliveries, raw
// WebSocket frames so that thousands of requests go out in one TCP write,
// and the registry view of one connection.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

// btBurst is how many messages a burst test sends in one write, and
// btPayloadLen the size of each one's data.
const (
	btBurst      = 10000
	btPayloadLen = 64
)

// btPayload is message i of a burst: 64 bytes that start with its index
// and are not valid JSON (so WebSocket deliveries carry them as strings).
func btPayload(i int) []byte {
	p := fmt.Appendf(nil, "m%07d-", i)
	for len(p) < btPayloadLen {
		p = append(p, 'x')
	}
	return p
}

// btIndex reads the index back from a payload btPayload made.
func btIndex(p []byte) int {
	var i int
	if _, err := fmt.Sscanf(string(p), "m%07d-", &i); err != nil {
		return -1
	}
	return i
}

// btWorkers sets how many workers a pool has.
func btWorkers(cfg *config.Config, pool string, n int) {
	p := cfg.Pools[pool]
	p.Workers = n
	cfg.Pools[pool] = p
}

// btHello is rbHelloConn that fails the test and closes at its end.
func btHello(t *testing.T, addr, device string) net.Conn {
	t.Helper()
	c, err := rbHelloConn(addr, rbAnySource, device)
	if err != nil {
		t.Fatalf("%s: %v", device, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// btWrite writes p in one call, with the hang guard.
func btWrite(t *testing.T, c net.Conn, p []byte) {
	t.Helper()
	if err := rbWrite(c, p); err != nil {
		t.Fatal(err)
	}
}

// btReader reads private frames through a buffer: one read call per
// many frames, so a test can take 100,000 deliveries quickly.
type btReader struct {
	c net.Conn
	r *bufio.Reader
}

func btNewReader(c net.Conn) *btReader {
	return &btReader{c: c, r: bufio.NewReaderSize(c, 256<<10)}
}

// next reads one frame and checks it with the codec; the payload is its
// own copy.
func (r *btReader) next() (private.Frame, error) { return rbReadFrameFrom(r.c, r.r) }

// btAck reads the next frame and returns the ACK it must be.
func (r *btReader) ack() (private.Ack, error) {
	f, err := r.next()
	if err != nil {
		return private.Ack{}, err
	}
	if f.Type != private.TypeAck {
		return private.Ack{}, fmt.Errorf("want an ACK, got %v %x", f.Type, f.Payload)
	}
	return private.DecodeAck(f.Payload)
}

// btWSMsg is any server message of the WebSocket JSON protocol.
type btWSMsg struct {
	Op       string          `json:"op"`
	Code     string          `json:"code"`
	Count    uint64          `json:"count"`
	Topic    string          `json:"topic"`
	Data     json.RawMessage `json:"data"`
	Retained bool            `json:"retained"`
}

// btWSDial opens a WebSocket client and closes it at the test's end.
func btWSDial(t *testing.T, g *Gateway) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: rbIOTimeout}
	ws, _, err := d.Dial("ws://"+g.Addr().String()+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// btWSRead reads one server message.
func btWSRead(ws *websocket.Conn) (btWSMsg, error) {
	if m, ok := btWSEarly.take(ws); ok {
		return m, nil
	}
	ws.SetReadDeadline(time.Now().Add(rbIOTimeout))
	_, p, err := ws.ReadMessage()
	if err != nil {
		return btWSMsg{}, err
	}
	var m btWSMsg
	if err := json.Unmarshal(p, &m); err != nil {
		return btWSMsg{}, fmt.Errorf("%w: %q", err, p)
	}
	return m, nil
}

// btWSSub subscribes and waits for the pong that follows, so the
// subscription is in place. The retained values the subscription
// delivers come before the pong: they are kept for btWSRead.
func btWSSub(t *testing.T, ws *websocket.Conn, filter string) {
	t.Helper()
	if err := ws.WriteJSON(map[string]string{"op": "sub", "topic": filter}); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteJSON(map[string]string{"op": "ping"}); err != nil {
		t.Fatal(err)
	}
	for {
		ws.SetReadDeadline(time.Now().Add(rbIOTimeout))
		_, p, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if string(p) == `{"op":"pong"}` {
			return
		}
		var m btWSMsg
		if err := json.Unmarshal(p, &m); err != nil || m.Topic == "" {
			t.Fatalf("before the pong: %q (%v)", p, err)
		}
		btWSEarly.keep(ws, m)
	}
}

// btWSEarly holds the deliveries btWSSub read before its pong, per
// connection, for btWSRead to return first.
var btWSEarly = earlyDeliveries{held: map[*websocket.Conn][]btWSMsg{}}

type earlyDeliveries struct {
	mu   sync.Mutex
	held map[*websocket.Conn][]btWSMsg
}

func (e *earlyDeliveries) keep(ws *websocket.Conn, m btWSMsg) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.held[ws] = append(e.held[ws], m)
}

func (e *earlyDeliveries) take(ws *websocket.Conn) (btWSMsg, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.held[ws]
	if len(q) == 0 {
		return btWSMsg{}, false
	}
	if len(q) == 1 {
		delete(e.held, ws)
	} else {
		e.held[ws] = q[1:]
	}
	return q[0], true
}

// btWSFrame is one masked client text frame, for requests written raw.
func btWSFrame(payload []byte) []byte {
	key := [4]byte{7, 1, 9, 3}
	f := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n < 1<<16:
		f = append(f, 0x80|126, byte(n>>8), byte(n))
	default:
		panic("test frame too big")
	}
	f = append(f, key[:]...)
	for i, c := range payload {
		f = append(f, c^key[i%4])
	}
	return f
}

// btRegistryDropped is the dropped count /debug/registry shows for the
// connection whose peer address is peer; -1 if no slot shows it.
func btRegistryDropped(t *testing.T, g *Gateway, peer net.Addr) int64 {
	t.Helper()
	var view struct {
		Slots []struct {
			Peer    string `json:"peer"`
			Dropped uint32 `json:"dropped"`
		} `json:"slots"`
	}
	if err := json.Unmarshal([]byte(httpGet(t, g, "/debug/registry?max=20000")), &view); err != nil {
		t.Fatal(err)
	}
	for _, s := range view.Slots {
		if s.Peer == peer.String() {
			return int64(s.Dropped)
		}
	}
	return -1
}
