package config

import (
	"errors"
	"strings"
	"testing"
)

// warningsOf parses and validates doc and returns its warnings' texts.
func warningsOf(t *testing.T, doc string) []string {
	t.Helper()
	cfg := mustParse(t, doc)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate(%q): %v", doc, err)
	}
	var out []string
	for _, w := range cfg.Warnings() {
		if !errors.Is(w, ErrWarning) || errors.Is(w, ErrInvalid) {
			t.Errorf("warning %v wraps the wrong sentinel", w)
		}
		out = append(out, w.Error())
	}
	return out
}

func expectWarnings(t *testing.T, doc string, want ...string) {
	t.Helper()
	got := warningsOf(t, doc)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings of\n%s\ngot:\n%s\nwant:\n%s", doc, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The routes list that once was the README's example: it replaces the
// default routes and names neither websocket nor modbus nor coap.
const routesWithoutWebSocket = `listen: 127.0.0.1:5020
routes:
  - match: {proto: private}
    action: handle
  - match: {proto: http}
    action: admin
  - match: {proto: "*"}
    action: quarantine
`

func TestWarnProtocolsWithoutRoute(t *testing.T) {
	expectWarnings(t, routesWithoutWebSocket,
		"routes: no route for proto websocket: WebSocket upgrades are taken for plain HTTP, so /ws and the dashboard's live feed answer 404; add - {match: {proto: websocket}, action: handle} to routes before the http route, or - {match: {proto: websocket}, action: quarantine} to turn it off on purpose (line 2)",
		"routes: no route for proto modbus: Modbus masters (mbpoll, PLCs, SCADA) are quarantined; add - {match: {proto: modbus}, action: handle} to routes, or - {match: {proto: modbus}, action: quarantine} to turn it off on purpose (line 2)",
		"routes: no route for proto coap: CoAP over TCP is quarantined (CoAP over UDP goes by udp.routes); add - {match: {proto: coap}, action: handle} to routes, or - {match: {proto: coap}, action: quarantine} to turn it off on purpose (line 2)",
	)
	// No catch-all at all: private and http fall out too.
	expectWarnings(t, "routes:\n  - match: {proto: websocket}\n    action: handle\n  - match: {proto: modbus}\n    action: handle\n  - match: {proto: coap}\n    action: handle\n",
		"routes: no route for proto private: devices speaking the private protocol (edgemux pub/sub, the Go client) are quarantined; add - {match: {proto: private}, action: handle} to routes, or - {match: {proto: private}, action: quarantine} to turn it off on purpose (line 1)",
		"routes: no route for proto http: plain HTTP is quarantined: /healthz, /metrics and the dashboard do not answer; add - {match: {proto: http}, action: admin} to routes, or - {match: {proto: http}, action: quarantine} to turn it off on purpose (line 1)",
	)
	// A route that takes only some sources does not count for all.
	got := warningsOf(t, strings.Replace(routesWithoutWebSocket, "  - match: {proto: \"*\"}", "  - match: {proto: \"*\", source: 10.0.0.0/8}\n    action: handle\n    pool: modbus\n  - match: {proto: \"*\"}", 1))
	if len(got) != 3 {
		t.Errorf("with a source-limited catch-all: %d warnings, want 3: %q", len(got), got)
	}
}

func TestWarnWebSocketQuarantined(t *testing.T) {
	expectWarnings(t, "admin:\n  enabled: false\nroutes:\n  - {match: {proto: private}, action: handle}\n  - {match: {proto: modbus}, action: handle}\n  - {match: {proto: coap}, action: handle}\n  - {match: {proto: \"*\"}, action: quarantine}\n",
		"routes: no route for proto websocket: WebSocket upgrades are taken for plain HTTP and quarantined, so /ws and the dashboard's live feed do not answer; add - {match: {proto: websocket}, action: handle} to routes before the http route, or - {match: {proto: websocket}, action: quarantine} to turn it off on purpose (line 3)",
	)
}

func TestWarnIdlePool(t *testing.T) {
	expectWarnings(t, "pools:\n  spare:\n    workers: 3\n    protocols: [modbus]\n",
		"pools.spare: no route sends it anything, so its workers (3) idle; route to it (routes: - {match: {proto: ...}, action: handle, pool: spare}) or remove it (spare: ~) (line 2)",
	)
	// A pool only datagrams reach is not idle while UDP is on.
	expectWarnings(t, "pools:\n  dgram: {workers: 1}\nudp:\n  routes: {rudp: dgram}\n")
	// ... and is when UDP is off.
	expectWarnings(t, "pools:\n  dgram: {workers: 1}\nudp:\n  enabled: false\n  routes: {rudp: dgram}\n",
		"pools.dgram: no route sends it anything, so its workers (1) idle; route to it (routes: - {match: {proto: ...}, action: handle, pool: dgram}) or remove it (dgram: ~) (line 2)")
}

func TestWarnDroppedDatagramClass(t *testing.T) {
	doc := `pools:
  coap: ~
routes:
  - {match: {proto: private}, action: handle}
  - {match: {proto: websocket}, action: handle}
  - {match: {proto: modbus}, action: handle}
  - {match: {proto: coap}, action: quarantine}
  - {match: {proto: http}, action: admin}
  - {match: {proto: "*"}, action: quarantine}
`
	expectWarnings(t, doc,
		`udp.routes.coap: no pool takes coap datagrams: their default pool coap is removed, so they are counted and dropped; route them (udp: {routes: {coap: POOL}}) or write coap: "" to drop them on purpose (line 2)`,
	)
	// Said on purpose: no warning.
	expectWarnings(t, doc+"udp:\n  routes: {coap: \"\"}\n")
}

func TestNoWarnings(t *testing.T) {
	for _, doc := range []string{
		"",
		string(DefaultYAML),
		// Protocols turned off on purpose, their pools removed.
		"pools: {modbus: ~, coap: ~}\nudp: {routes: {coap: \"\"}}\nroutes:\n  - {match: {proto: private}, action: handle}\n  - {match: {proto: websocket}, action: handle}\n  - {match: {proto: modbus}, action: quarantine}\n  - {match: {proto: coap}, action: quarantine}\n  - {match: {proto: http}, action: admin}\n  - {match: {proto: \"*\"}, action: quarantine}\n",
		// A catch-all that handles: everything goes somewhere.
		"pools:\n  all: {workers: 1, protocols: [private, websocket, modbus, coap, http]}\n  private: ~\n  websocket: ~\n  modbus: ~\n  coap: ~\nudp: {routes: {rudp: all, coap: all}}\nroutes:\n  - {match: {proto: websocket}, action: handle, pool: all}\n  - {match: {proto: \"*\"}, action: handle, pool: all}\n",
	} {
		expectWarnings(t, doc)
	}
}
