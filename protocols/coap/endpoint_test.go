package coap

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
)

const (
	con = message.Confirmable
	non = message.NonConfirmable
	ack = message.Acknowledgement
	rst = message.Reset
)

func observeReg(v uint32) []message.Option { return []message.Option{uintOpt(message.Observe, v)} }

// TestConfirmableRequestPiggyBacked: a CON request's answer rides on its
// ACK (same Message ID and token); a NON request gets a NON answer.
func TestConfirmableRequestPiggyBacked(t *testing.T) {
	tb := newTestbed(t, Config{})
	tb.in(peerA, msg{typ: con, code: codes.PUT, mid: 7, token: "tk", path: "/t/a/b", payload: "21.5"})
	m := tb.one()
	if m.Type != ack || m.MessageID != 7 || m.Code != codes.Changed || string(m.Token) != "tk" {
		t.Fatalf("PUT answer = %v, want ACK 2.04 mid 7 token tk", m.String())
	}
	tb.in(peerA, msg{typ: non, code: codes.GET, mid: 8, token: "t2", path: "/t/a/b"})
	m = tb.one()
	if m.Type != non || m.Code != codes.Content || string(m.Payload) != "21.5" || string(m.Token) != "t2" {
		t.Fatalf("GET answer = %v, want NON 2.05 21.5", m.String())
	}
	if cf, _ := m.Options.ContentFormat(); cf != message.AppJSON {
		t.Errorf("content format %v, want application/json for a JSON number", cf)
	}
}

// TestDuplicateAnsweredFromCache: a request repeated with the same
// Message ID is answered with the same bytes and not executed again: one
// publish, however many copies arrive.
func TestDuplicateAnsweredFromCache(t *testing.T) {
	tb := newTestbed(t, Config{})
	req := msg{typ: con, code: codes.POST, mid: 99, token: "x", path: "/t/dup", payload: "1"}
	for range 3 {
		tb.in(peerA, req)
	}
	if len(tb.sent) != 3 || !bytes.Equal(tb.sent[0].b, tb.sent[1].b) || !bytes.Equal(tb.sent[0].b, tb.sent[2].b) {
		t.Fatalf("answers differ or missing: %v", tb.sent)
	}
	if st := tb.h.Stats(); st.Published != 1 || st.Duplicates != 2 {
		t.Errorf("published %d, duplicates %d; want 1 and 2", st.Published, st.Duplicates)
	}
	// Another peer with the same Message ID is another exchange.
	tb.in(peerB, req)
	if st := tb.h.Stats(); st.Published != 2 {
		t.Errorf("peer B's request was taken for a duplicate")
	}
	// Past EXCHANGE_LIFETIME the ID is new again.
	tb.now = tb.now.Add(tb.h.Config().ExchangeLifetime + time.Second)
	tb.e.Tick(tb.now)
	tb.in(peerA, req)
	if st := tb.h.Stats(); st.Published != 3 {
		t.Errorf("a request after EXCHANGE_LIFETIME was answered from the cache")
	}
}

// TestResponseCacheBounded: the cache keeps coap.response_cache answers,
// the oldest going first.
func TestResponseCacheBounded(t *testing.T) {
	tb := newTestbed(t, Config{ResponseCache: 16})
	for i := range 100 {
		tb.in(peerA, msg{typ: con, code: codes.GET, mid: uint16(i), path: "/t/none"})
	}
	if n := tb.e.cache.len(); n != 16 {
		t.Fatalf("cache holds %d answers, want 16", n)
	}
	tb.out()
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 99, path: "/t/none"})
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 0, path: "/t/none"})
	if st := tb.h.Stats(); st.Duplicates != 1 || st.Requests != 101 {
		t.Errorf("duplicates %d requests %d: want the newest cached and the oldest forgotten", st.Duplicates, st.Requests)
	}
}

// TestObserveTopic: registration answers with the value and an Observe
// number; each publish is a notification with a higher one; GET with
// Observe 1 ends it.
func TestObserveTopic(t *testing.T) {
	tb := newTestbed(t, Config{})
	tb.publish("plant/l1/temp", "20")
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 1, token: "ob", path: "/t/plant/l1/temp", opts: observeReg(0)})
	m := tb.one()
	if m.Code != codes.Content || string(m.Payload) != "20" {
		t.Fatalf("registration answer %v", m.String())
	}
	last := observeOf(t, m)
	for _, v := range []string{"21", "22", "23"} {
		tb.publish("plant/l1/temp", v)
		n := tb.one()
		if string(n.Payload) != v || string(n.Token) != "ob" || n.Type != non {
			t.Fatalf("notification %v, want NON %s with token ob", n.String(), v)
		}
		if seq := observeOf(t, n); seq <= last {
			t.Fatalf("Observe %d after %d: not rising", seq, last)
		} else {
			last = seq
		}
	}
	tb.publish("plant/l2/temp", "5") // another topic: nothing
	if len(tb.sent) != 0 {
		t.Fatalf("notified of another topic: %v", tb.out())
	}
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 2, token: "ob", path: "/t/plant/l1/temp", opts: observeReg(1)})
	if m := tb.one(); m.Options.HasOption(message.Observe) {
		t.Errorf("deregistration answer still carries Observe")
	}
	tb.publish("plant/l1/temp", "24")
	if len(tb.sent) != 0 {
		t.Errorf("notified after deregistration")
	}
	if tb.bus.Stats().Subscribers != 0 {
		t.Errorf("the peer still holds a bus subscriber")
	}
}

// TestObserveFilter: a filter's observer gets the retained values, then
// every update of every matching topic, each naming its topic.
func TestObserveFilter(t *testing.T) {
	tb := newTestbed(t, Config{})
	tb.publish("plant/a/temp", "1")
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 1, token: "f", path: "/t/plant/+/temp", opts: observeReg(0)})
	tb.e.Woken(tb.now) // the retained replay
	ms := tb.out()
	if len(ms) != 2 || ms[0].Code != codes.Content || !strings.Contains(string(ms[1].Payload), `"topic":"plant/a/temp","data":1`) {
		t.Fatalf("registration and retained value: %v", ms)
	}
	tb.publish("plant/b/temp", "hot")
	n := tb.one()
	if !strings.Contains(string(n.Payload), `"topic":"plant/b/temp","data":"hot"`) || observeOf(t, n) <= observeOf(t, ms[1]) {
		t.Fatalf("filter notification %q", n.Payload)
	}
	tb.publish("plant/b/pressure", "1")
	if len(tb.sent) != 0 {
		t.Errorf("a topic outside the filter was notified")
	}
	// A GET without Observe on a filter is a bad request.
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 2, path: "/t/plant/#"})
	if m := tb.one(); m.Code != codes.BadRequest {
		t.Errorf("GET of a filter = %v, want 4.00", m.Code)
	}
}

// TestResetEndsObservation: a Reset naming a notification's Message ID
// ends that observation (RFC 7641 section 3.6).
func TestResetEndsObservation(t *testing.T) {
	tb := newTestbed(t, Config{})
	tb.publish("x", "0")
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 1, token: "o", path: "/t/x", opts: observeReg(0)})
	tb.one()
	tb.publish("x", "1")
	n := tb.one()
	tb.in(peerA, msg{typ: rst, code: codes.Empty, mid: uint16(n.MessageID)})
	tb.publish("x", "2")
	if len(tb.sent) != 0 {
		t.Fatalf("notified after Reset: %v", tb.out())
	}
	if len(tb.e.peers[peerA].w.obs) != 0 {
		t.Errorf("observation still held")
	}
}

// TestConfirmableEveryN: every coap.confirm_every-th notification is
// confirmable; an unacknowledged one is retransmitted with a doubled
// timeout, and after coap.max_retransmit the observer is dropped.
func TestConfirmableEveryN(t *testing.T) {
	tb := newTestbed(t, Config{ConfirmEvery: 3, MaxRetransmit: 2, AckTimeout: time.Second})
	tb.publish("x", "0")
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 1, token: "o", path: "/t/x", opts: observeReg(0)})
	tb.one()
	var types []message.Type
	var conMID int32
	for i := range 6 {
		tb.publish("x", string(rune('a'+i)))
		n := tb.one()
		types = append(types, n.Type)
		if n.Type == con {
			if conMID == 0 {
				conMID = n.MessageID
				tb.in(peerA, msg{typ: ack, code: codes.Empty, mid: uint16(n.MessageID)})
			}
		}
	}
	want := []message.Type{non, non, con, non, non, con}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("notification types %v, want %v", types, want)
		}
	}
	// The second CON is not acknowledged: retransmitted twice, then dead.
	for retry := range 2 {
		tb.runTimers()
		if m := tb.one(); m.Type != con {
			t.Fatalf("retransmission %d = %v", retry, m.String())
		}
	}
	tb.runTimers()
	if st := tb.h.Stats(); st.DeadObservers != 1 || st.Retransmits != 2 {
		t.Fatalf("dead %d retransmits %d, want 1 and 2", st.DeadObservers, st.Retransmits)
	}
	tb.publish("x", "z")
	if len(tb.sent) != 0 || tb.bus.Stats().Subscribers != 0 {
		t.Errorf("a dead observer is still notified")
	}
}

// TestObserverOutlivesIdlePeers: a peer without observations is forgotten
// after coap.peer_idle; an observer is kept however long it is silent
// (no 16 s cliff), and is still notified.
func TestObserverOutlivesIdlePeers(t *testing.T) {
	tb := newTestbed(t, Config{PeerIdle: 30 * time.Second})
	tb.publish("x", "0")
	tb.in(peerA, msg{typ: con, code: codes.GET, mid: 1, token: "o", path: "/t/x", opts: observeReg(0)})
	tb.in(peerB, msg{typ: con, code: codes.GET, mid: 1, path: "/t/x"})
	tb.out()
	tb.now = tb.now.Add(10 * time.Minute)
	tb.e.Tick(tb.now)
	if _, ok := tb.e.peers[peerB]; ok {
		t.Errorf("idle peer B kept")
	}
	if _, ok := tb.e.peers[peerA]; !ok {
		t.Fatalf("observer A forgotten")
	}
	tb.publish("x", "1")
	if n := tb.one(); string(n.Payload) != "1" {
		t.Errorf("observer not notified after 10 min: %v", n.String())
	}
}

// TestPeersCapped: at coap.max_peers the longest idle non-observer makes
// room; when every place is an observer's, a new peer gets 5.03 and no
// state.
func TestPeersCapped(t *testing.T) {
	tb := newTestbed(t, Config{MaxPeers: 4})
	tb.publish("x", "0")
	for i := range 10 {
		from := netipPort(i)
		tb.in(from, msg{typ: con, code: codes.GET, mid: 1, path: "/t/x"})
		tb.now = tb.now.Add(time.Millisecond)
	}
	if n := tb.e.Peers(); n != 4 {
		t.Fatalf("%d peers, want 4", n)
	}
	if _, ok := tb.e.peers[netipPort(9)]; !ok {
		t.Errorf("the newest peer is not the one kept")
	}
	tb.out()
	for i := 10; i < 14; i++ {
		tb.in(netipPort(i), msg{typ: con, code: codes.GET, mid: 1, token: "o", path: "/t/x", opts: observeReg(0)})
	}
	tb.out()
	tb.in(netipPort(20), msg{typ: con, code: codes.GET, mid: 5, path: "/t/x"})
	if m := tb.one(); m.Code != codes.ServiceUnavailable || m.Type != ack {
		t.Errorf("new peer with every place observed: %v, want ACK 5.03", m.String())
	}
	if n := tb.e.Peers(); n != 4 || tb.h.Stats().PeersRefused != 1 {
		t.Errorf("%d peers, refused %d", n, tb.h.Stats().PeersRefused)
	}
}

func netipPort(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.1.1"), uint16(1000+i))
}
