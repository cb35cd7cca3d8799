package gateway

import (
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/protocols/coap"
)

// TestCloseReasonPeerReset: a client that resets its connection (closed
// with SO_LINGER 0, as a killed process or one that leaves input unread
// does) is counted as reset by its peer, and one that closes cleanly as
// closed by its peer; neither is the gateway's "error".
func TestCloseReasonPeerReset(t *testing.T) {
	g := startGateway(t, rbConfig(t), Options{})
	addr := g.Addr().String()
	for i, reset := range []bool{true, false} {
		c, err := rbDialFrom(addr, rbSource(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := rbWrite(c, rbHelloFrame(fmt.Sprint("leaver-", i))); err != nil {
			t.Fatal(err)
		}
		if err := rbExpectAck(c, 0); err != nil {
			t.Fatal(err)
		}
		if reset {
			c.(*net.TCPConn).SetLinger(0)
		}
		c.Close()
	}
	series := func(reason string) string {
		return metric(httpGet(t, g, "/metrics"), `edgemux_closed_total{protocol="private",reason="`+reason+`"}`)
	}
	eventually(t, "both closes counted", func() bool {
		return series("peer_reset") == "1" && series("peer_closed") == "1"
	})
	if v := series("error"); v != "0" {
		t.Errorf(`closed with reason="error": %s, want 0`, v)
	}
}

// TestCloseReasonLabels: the reasons a session returns map to their
// labels; a CoAP peer's Release is its clean close.
func TestCloseReasonLabels(t *testing.T) {
	for err, want := range map[error]string{
		nil:                     "none",
		protocols.ErrPeerClosed: "peer_closed",
		coap.ErrReleased:        "peer_closed",
		coap.ErrAborted:         "error",
		fmt.Errorf("read: %w", syscall.ECONNRESET): "peer_reset",
		protocols.ErrIdle:                          "idle",
	} {
		if got := reasonLabel(err); got != want {
			t.Errorf("reasonLabel(%v) = %q, want %q", err, got, want)
		}
	}
}
