package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestWebSocketSessionsShareLeasesSafely: WebSocket sessions borrow
// gorilla Conns per call from pools shared by the pool's workers (see
// protocols/websocket, "Leases"). Clients with and without
// permessage-deflate, each on its own topic, publish messages of random
// sizes (some fragmented) at the same time, with pings and the odd
// malformed frame on a sacrificial connection in between; every client
// must get back exactly its own messages, in order and intact.
func TestWebSocketSessionsShareLeasesSafely(t *testing.T) {
	clients, messages := 32, 40
	if testing.Short() {
		clients, messages = 8, 10
	}
	cfg := rbConfig(t)
	cfg.WebSocket.Compression = true
	cfg.WebSocket.AllowedOrigins = []string{"*"}
	g := startGateway(t, cfg, Options{})
	url := "ws://" + g.Addr().String() + "/ws"

	var wg sync.WaitGroup
	errs := make(chan error, clients+1)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := leaseClient(url, i, messages, i%2 == 0); err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
			}
		}()
	}
	wg.Add(1)
	go func() { // breaks its connections in ways that stick in gorilla
		defer wg.Done()
		for i := range messages {
			if err := leaseSpoiler(url, i); err != nil {
				errs <- fmt.Errorf("spoiler: %w", err)
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// leaseClient subscribes to its own topic, publishes messages with unique
// payloads and checks what comes back.
func leaseClient(url string, id, messages int, compress bool) error {
	d := websocket.Dialer{HandshakeTimeout: rbIOTimeout, EnableCompression: compress, WriteBufferSize: 512}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		return err
	}
	defer ws.Close()
	topic := fmt.Sprintf("lease/%d", id)
	if err := ws.WriteJSON(map[string]any{"op": "sub", "topic": topic}); err != nil {
		return err
	}
	if err := leasePong(ws); err != nil { // the sub is in place
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	want := make([]string, messages)
	for n := range messages {
		// Up to 3 KB: with a 512-byte write buffer, bigger ones go out in
		// several frames.
		want[n] = fmt.Sprintf("%d-%d-%s", id, n, bytes.Repeat([]byte{'a' + byte(n%26)}, rng.IntN(3000)))
		if err := ws.WriteJSON(map[string]any{"op": "pub", "topic": topic, "data": want[n]}); err != nil {
			return err
		}
		if n%7 == 0 {
			if err := ws.WriteJSON(map[string]string{"op": "ping"}); err != nil {
				return err
			}
		}
	}
	ws.SetReadDeadline(time.Now().Add(rbIOTimeout))
	for n := 0; n < messages; {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return fmt.Errorf("after %d of %d deliveries: %w", n, messages, err)
		}
		var d struct {
			Op, Topic string
			Data      string
		}
		if err := json.Unmarshal(msg, &d); err != nil {
			return fmt.Errorf("not JSON: %q", msg)
		}
		switch {
		case d.Op == "pong":
			continue
		case d.Topic != topic || d.Data != want[n]:
			return fmt.Errorf("delivery %d: topic %q, data %.40q...; want %.40q...", n, d.Topic, d.Data, want[n])
		}
		n++
	}
	return nil
}

// leasePong sends an application ping and waits for its pong.
func leasePong(ws *websocket.Conn) error {
	if err := ws.WriteJSON(map[string]string{"op": "ping"}); err != nil {
		return err
	}
	ws.SetReadDeadline(time.Now().Add(rbIOTimeout))
	_, msg, err := ws.ReadMessage()
	if err != nil {
		return err
	}
	if string(msg) != `{"op":"pong"}` {
		return fmt.Errorf("want a pong, got %q", msg)
	}
	return nil
}

// leaseSpoiler opens a compressed connection and ends it badly: corrupt
// deflate data (1007), a close frame (the server's close reply sticks in
// gorilla), or an inflation past max_message (1009).
func leaseSpoiler(url string, n int) error {
	d := websocket.Dialer{HandshakeTimeout: rbIOTimeout, EnableCompression: true}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		return err
	}
	defer ws.Close()
	var frame []byte
	switch n % 3 {
	case 0:
		frame = maskedFrame(0xc1, []byte{0xff, 0xff, 0xff, 0xff})
	case 1:
		frame = maskedFrame(0x88, []byte{0x03, 0xe8})
	default:
		ws.EnableWriteCompression(true)
		return ws.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("z"), 200000))
	}
	_, err = ws.NetConn().Write(frame)
	return err
}

// maskedFrame is one client frame with a short payload.
func maskedFrame(b0 byte, payload []byte) []byte {
	key := [4]byte{1, 2, 3, 4}
	f := append([]byte{b0, 0x80 | byte(len(payload))}, key[:]...)
	for i, c := range payload {
		f = append(f, c^key[i%4])
	}
	return f
}
