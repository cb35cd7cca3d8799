package websocket

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	gorilla "github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
)

// errorCode returns the code of the one {"op":"error"} reply in got, "".
func errorCode(got []string) string {
	var e struct{ Op, Code string }
	if len(got) != 1 || json.Unmarshal([]byte(got[0]), &e) != nil || e.Op != "error" {
		return ""
	}
	return e.Code
}

// TestGatewayTopics: "$" topics are the gateway's. Nobody publishes there
// over the WebSocket; only sessions the operator check admitted (by the
// Authorization or Cookie header the parser keeps for it) subscribe; and
// a new check ends the operator sessions of the old one with 1008.
func TestGatewayTopics(t *testing.T) {
	s := newServer(t, config.WebSocket{}, nil, chunkers[0].next)
	if err := s.bus.Publish("$SYS/edgemux/stats", []byte(`{"open":1}`), "edgemux"); err != nil {
		t.Fatal(err)
	}
	device, _ := s.dial(nil)
	for _, msg := range []string{`{"op":"sub","topic":"$SYS/edgemux/stats"}`, `{"op":"pub","topic":"$SYS/edgemux/stats","data":1}`} {
		writeJSON(t, device, msg)
		if got := syncPing(t, device); errorCode(got) != CodeForbidden {
			t.Errorf("no check set, %s: got %q, want error %s", msg, got, CodeForbidden)
		}
	}

	var seen []netip.AddrPort
	s.h.SetOperatorCheck(func(peer netip.AddrPort, h http.Header) bool {
		seen = append(seen, peer) // the dials below are one at a time
		return h.Get("Authorization") == "Bearer letmein" || strings.Contains(h.Get("Cookie"), "op=ok")
	})
	stranger, _ := s.dial(http.Header{"Authorization": {"Bearer guess"}})
	writeJSON(t, stranger, `{"op":"sub","topic":"$SYS/#"}`)
	if got := syncPing(t, stranger); errorCode(got) != CodeForbidden {
		t.Errorf("wrong token: got %q, want error %s", got, CodeForbidden)
	}
	byToken, p := s.dial(http.Header{"Authorization": {"Bearer letmein"}})
	byCookie, _ := s.dial(http.Header{"Cookie": {"theme=dark; op=ok"}})
	for _, ws := range []*gorilla.Conn{byToken, byCookie} {
		writeJSON(t, ws, `{"op":"sub","topic":"$SYS/edgemux/stats"}`)
		if d := decodeDelivery(t, readJSON(t, ws)); d.Topic != "$SYS/edgemux/stats" || string(d.Data) != `{"open":1}` || !d.Retained {
			t.Errorf("operator's retained stats = %+v", d)
		}
		writeJSON(t, ws, `{"op":"pub","topic":"$SYS/edgemux/stats","data":2}`)
		if got := syncPing(t, ws); errorCode(got) != CodeForbidden {
			t.Errorf("operator publishing a $ topic: got %q, want error %s", got, CodeForbidden)
		}
	}
	if len(seen) != 3 || seen[0] != netip.MustParseAddrPort("127.0.0.1:40000") {
		t.Errorf("the check saw peers %v, want the three handshakes' own", seen)
	}

	// New rules: the operator sessions of the old ones close at their next
	// delivery; a device session is not touched.
	s.h.SetOperatorCheck(func(netip.AddrPort, http.Header) bool { return false })
	writeJSON(t, device, `{"op":"sub","topic":"plant/#"}`)
	syncPing(t, device)
	s.bus.Publish("$SYS/edgemux/stats", []byte(`{"open":2}`), "edgemux")
	s.bus.Publish("plant/temp", []byte("21"), "modbus")
	byToken.SetReadDeadline(time.Now().Add(safetyNet))
	_, _, err := byToken.ReadMessage()
	var ce *gorilla.CloseError
	if !errors.As(err, &ce) || ce.Code != ClosePolicy || ce.Text != "operator access changed" {
		t.Errorf("old operator session: read ended with %v, want close 1008", err)
	}
	if reason := p.waitClosed(t); !errors.Is(reason, ErrOperatorChanged) {
		t.Errorf("reason %v", reason)
	}
	if d := decodeDelivery(t, readJSON(t, device)); d.Topic != "plant/temp" {
		t.Errorf("device delivery = %+v", d)
	}
}
