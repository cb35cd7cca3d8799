package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
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

// TestRecycledPayloadsArriveWholeCoAP is TestRecycledPayloadsArriveWhole
// for a lone CoAP observer (coap-client, over UDP and over TCP), with
// payloads that fit one block: every notification it prints must be one
// of the burst's messages with its own bytes, in order (over UDP some
// may be lost, never changed).
func TestRecycledPayloadsArriveWholeCoAP(t *testing.T) {
	requireCoAPClient(t)
	const messages = 200
	payload := func(i int) []byte { // 100 to 999 bytes: one block
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 100+i*97%900)
		copy(p, fmt.Sprintf("%04d:", i))
		return p
	}
	for _, scheme := range []string{"coap", "coap+tcp"} {
		t.Run(scheme, func(t *testing.T) {
			_, addr := coapGateway(t, nil)
			pub := bigPublisher(t, addr)
			if err := rbWrite(pub, rbPubFrame(0, "rc/x", []byte("start"))); err != nil {
				t.Fatal(err)
			}
			at := addr
			if scheme == "coap+tcp" {
				at = coapTCPRelay(t, addr) // libcoap 4.3.1 cannot take some reads whole: see coapTCPRelay
			}
			out := coapObserve(t, "60", scheme+"://"+at+"/t/rc/x")
			eventually(t, "observer registered", func() bool { return strings.Contains(out.String(), "start") })
			var burst []byte
			for i := range messages {
				burst = append(burst, rbPubFrame(0, "rc/x", payload(i))...)
			}
			if err := rbWrite(pub, burst); err != nil {
				t.Fatal(err)
			}
			// Over UDP a notification can be lost (the client's socket
			// buffer overflows in a burst like this one), so the end is
			// a marker published until one arrives.
			eventually(t, "end marker", func() bool {
				if err := rbWrite(pub, rbPubFrame(0, "rc/x", []byte("end"))); err != nil {
					t.Fatal(err)
				}
				return strings.Contains(out.String(), "end")
			})
			// coap-client prints the payloads back to back: each must
			// be the whole message its index names, after the one before.
			rest, _ := strings.CutPrefix(out.String(), "start")
			rest, _, _ = strings.Cut(rest, "end")
			prev, seen := -1, 0
			for rest != "" {
				i, err := strconv.Atoi(rest[:min(4, len(rest))])
				if err != nil || i <= prev || i >= messages || !strings.HasPrefix(rest, string(payload(i))) {
					t.Fatalf("after message %d, a notification starting %.16q", prev, rest)
				}
				rest = rest[len(payload(i)):]
				prev, seen = i, seen+1
			}
			t.Logf("%d of %d messages notified", seen, messages)
			if seen == 0 || scheme == "coap+tcp" && seen != messages {
				t.Errorf("%d of %d messages notified over %s", seen, messages, scheme)
			}
		})
	}
}
