package gateway

// Lent turns (worker.lend): a loop that finds a cheap worker asleep runs
// its turn itself. The write path's handshake (arm the EPOLLOUT wish, then
// flush once more) then runs on the loop's goroutine, and the edges that
// move a large output along come back to a loop that may lend again.

import (
	"strconv"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/route"
)

// lentTurns is what the gateway's workers' parkers counted as lent.
func lentTurns(g *Gateway) uint64 {
	var n uint64
	for _, w := range g.workers {
		if pk, ok := w.park.(*route.Parker); ok {
			n += pk.Stats().Lends
		}
	}
	return n
}

// TestLentTurnsDeliverWhole: one message at a time, each many times a
// small socket's buffer, to a reader that reads it all before the next is
// published. Between messages the workers sleep, so the publish and the
// EPOLLOUT edges find them asleep and their loop lends itself their
// turns. Every message arrives whole and in order under every policy;
// the ring policies lent turns, inline (no rings, no sleeping workers)
// none.
func TestLentTurnsDeliverWhole(t *testing.T) {
	messages := 200
	if testing.Short() {
		messages = 50
	}
	for _, policy := range everyPolicy {
		t.Run(policy, func(t *testing.T) {
			cfg := largeOutputConfig(t, policy)
			cfg.Dispatch.LendBelow = 10 * time.Millisecond // the race detector's slower turns still qualify
			g := startGateway(t, cfg, Options{})
			addr := g.Addr().String()
			sub := privateSubscriber(t, addr, "reader", true)
			pub := bigPublisher(t, addr)
			for i := range messages {
				if err := rbWrite(pub, rbPubFrame(0, "big/"+strconv.Itoa(i%8), roundPayload(0, i))); err != nil {
					t.Fatal(err)
				}
				f, err := rbReadFrame(sub)
				if err != nil {
					t.Fatalf("message %d: %v (lent turns so far: %d)", i, err, lentTurns(g))
				}
				m, err := private.DecodePub(f.Payload)
				if err != nil {
					t.Fatal(err)
				}
				if err := checkRoundPayload(m.Data, 0, i); err != nil {
					t.Fatal(err)
				}
			}
			lent := lentTurns(g)
			t.Logf("%d turns lent for %d messages", lent, messages)
			switch {
			case policy == "inline" && lent != 0:
				t.Fatalf("inline lent %d turns", lent)
			case policy != "inline" && lent == 0:
				t.Fatal("no turn was lent: the path under test did not run")
			}
		})
	}
}
