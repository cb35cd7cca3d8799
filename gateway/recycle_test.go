package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/edgemux/edgemux/protocols/private"
)

// recycledMessages and recycledSize: one burst of payloads from 100 bytes
// to just under the bus's largest pooled size (16 KiB), so every class of
// its recycled buffers is used and reused, about 1.9 MB in all: far past
// a small socket window, so the deliveries wait in the gateway while the
// publisher's next messages take buffers from the pools.
const recycledMessages = 240

func recycledSize(i int) int { return 100 + i*997%16000 }

// recycledPayload is message i: its index up front, as text (it reads the
// same in a WebSocket delivery's JSON), then a filler of its own letter.
func recycledPayload(i int) []byte {
	p := bytes.Repeat([]byte{byte('a' + i%26)}, recycledSize(i))
	copy(p, fmt.Sprintf("%04d:", i))
	return p
}

func checkRecycledPayload(p []byte, i int) error {
	if want := recycledPayload(i); !bytes.Equal(p, want) {
		return fmt.Errorf("message %d: %d bytes starting %.12q, want %d starting %.12q", i, len(p), p, len(want), want)
	}
	return nil
}

// TestRecycledPayloadsArriveWhole: a private session and a WebSocket
// session each read alone, so the bus copies what they are sent into
// recycled buffers, which go back to their pools as each batch is
// framed. Every message must arrive with its own bytes, under every
// dispatch policy, while the readers lag far behind the publisher: a
// buffer given back too early would carry a later message's bytes.
func TestRecycledPayloadsArriveWhole(t *testing.T) {
	for _, policy := range everyPolicy {
		t.Run(policy+"/private", func(t *testing.T) {
			g := startGateway(t, largeOutputConfig(t, policy), Options{})
			addr := g.Addr().String()
			sub := privateSubscriber(t, addr, "reader", true)
			publishRecycled(t, bigPublisher(t, addr))
			for i := range recycledMessages {
				f, err := rbReadFrame(sub)
				if err != nil {
					t.Fatalf("stalled after %d of %d messages: %v", i, recycledMessages, err)
				}
				m, err := private.DecodePub(f.Payload)
				if err != nil {
					t.Fatal(err)
				}
				if err := checkRecycledPayload(m.Data, i); err != nil {
					t.Fatal(err)
				}
			}
		})
		t.Run(policy+"/websocket", func(t *testing.T) {
			g := startGateway(t, largeOutputConfig(t, policy), Options{})
			addr := g.Addr().String()
			ws := wsBigSubscriber(t, addr, true)
			publishRecycled(t, bigPublisher(t, addr))
			for i := range recycledMessages {
				var m struct{ Data string }
				if err := json.Unmarshal(readWSMessage(t, ws), &m); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if err := checkRecycledPayload([]byte(m.Data), i); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// publishRecycled sends the burst in one write, to eight topics in turn,
// so the cache's hold on each buffer ends at a different time from the
// reader's.
func publishRecycled(t *testing.T, pub net.Conn) {
	t.Helper()
	var burst []byte
	for i := range recycledMessages {
		burst = append(burst, rbPubFrame(0, "big/"+strconv.Itoa(i%8), recycledPayload(i))...)
	}
	if err := rbWrite(pub, burst); err != nil {
		t.Fatal(err)
	}
}
