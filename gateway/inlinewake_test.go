package gateway

// Under the inline policy a loop runs its pools' workers itself, and a
// wake from another goroutine (a bus delivery published on another loop)
// reaches it through its eventfd. A wake from the loop's own turn needs
// none: the loop looks at its workers' inboxes before it waits again.
// (Deliveries across loops are in TestOnePortEndToEnd/inline and the bus
// tests under every policy.)

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/edgemux/edgemux/protocols/private"
)

// countInlineWakes counts the eventfd wakes posted for inline workers.
// Call it before the gateway starts; its cleanup runs after the gateway's.
func countInlineWakes(t *testing.T) *atomic.Int64 {
	n := new(atomic.Int64)
	testHookPost = func(cmd uint32) {
		if cmd&loopCmdWakeInline != 0 {
			n.Add(1)
		}
	}
	t.Cleanup(func() { testHookPost = nil })
	return n
}

// TestInlineEchoPostsNoWake: a private client publishing to its own
// subscription under the inline policy. Each PUB is delivered back to the
// same connection from within the loop's turn; posting an eventfd wake
// for it cost a write(2) per request and a needless loop turn (one wake
// per request before the loop knew it was awake).
func TestInlineEchoPostsNoWake(t *testing.T) {
	const pubs = 200
	cfg := rbConfig(t)
	cfg.Dispatch.Policy = "inline"
	wakes := countInlineWakes(t)
	g := startGateway(t, cfg, Options{})
	c, err := rbHelloConn(g.Addr().String(), rbAnySource, "echoer")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := rbWrite(c, rbSubFrame(1, "echo/self")); err != nil {
		t.Fatal(err)
	}
	if err := rbExpectAck(c, 1); err != nil {
		t.Fatal(err)
	}
	wakes.Store(0)
	for i := range pubs {
		payload := []byte(strconv.Itoa(i))
		if err := rbWrite(c, rbPubFrame(0, "echo/self", payload)); err != nil {
			t.Fatal(err)
		}
		f, err := rbReadFrame(c)
		if err != nil || f.Type != private.TypePub {
			t.Fatalf("pub %d: got %v, %v; want the delivery", i, f.Type, err)
		}
	}
	if n := wakes.Load(); n > pubs/10 {
		t.Fatalf("%d eventfd wakes for %d echoed publishes: the loop is woken for work of its own turn", n, pubs)
	}
}
