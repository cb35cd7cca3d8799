package gateway

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/config"
)

// Tests of the admin access groups through the real gateway: HTTP from
// chosen loopback sources (127.0.0.2 and up stand for other hosts), tokens
// from files, reloads.

// accessConfig is the test configuration with doc (YAML) applied over the
// defaults: tests state their access rules the way an integrator does.
func accessConfig(t *testing.T, doc string) config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Listen, cfg.Loops = "127.0.0.1:0", 2
	return cfg
}

// tokenFile writes a token to a fresh file and returns its path.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fromSource is an HTTP client whose connections come from src.
func fromSource(src string) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// answer is what one admin request got.
type answer struct {
	status int
	body   string
	header http.Header
}

// ask sends one request from src; header lines are "Name: value".
func ask(t *testing.T, g *Gateway, src, method, path string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+g.Addr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range header {
		if h == "" {
			continue
		}
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Add(name, value)
	}
	resp, err := fromSource(src).Do(req)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", method, path, src, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, string(b), resp.Header}
}

// refusedCount reads edgemux_refused_total{reason} from the metrics,
// scraped from src.
func refusedCount(t *testing.T, g *Gateway, src, reason string, header ...string) string {
	t.Helper()
	a := ask(t, g, src, "GET", "/metrics", header...)
	if a.status != http.StatusOK {
		t.Fatalf("/metrics from %s: %d %s", src, a.status, a.body)
	}
	return metric(a.body, `edgemux_refused_total{reason="`+reason+`"}`)
}

// TestAdminPprofOffByDefault: the profiler (heap, goroutine stacks, CPU
// profiles) answers nobody until admin.pprof turns it on; a reload turns
// it on and off. Fails before this commit: /debug/pprof/ answered 200.
func TestAdminPprofOffByDefault(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=2", "/debug/pprof/heap", "/debug/pprof/symbol"} {
		if a := ask(t, g, "127.0.0.1", "GET", path); a.status != http.StatusNotFound || !strings.Contains(a.body, "admin.pprof") {
			t.Errorf("GET %s with pprof off: %d %.120q, want 404", path, a.status, a.body)
		}
	}
	on := accessConfig(t, "admin:\n  pprof: true\n")
	if err := g.Reload(on); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if a := ask(t, g, "127.0.0.1", "GET", "/debug/pprof/goroutine?debug=1"); a.status != http.StatusOK || !strings.Contains(a.body, "goroutine profile") {
		t.Errorf("pprof on: %d %.120q", a.status, a.body)
	}
	if err := g.Reload(testConfig(t)); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if a := ask(t, g, "127.0.0.1", "GET", "/debug/pprof/"); a.status != http.StatusNotFound {
		t.Errorf("pprof off again: %d", a.status)
	}
}

// TestAdminAccessGroups: each group admits its own sources only; a path
// no group names is the operator's; a refusal is 403 with a body that
// names the key, and counted. A reload moves the operator to another
// source. Fails before this commit: the admin section had no groups (and
// /debug/registry answered any source).
func TestAdminAccessGroups(t *testing.T) {
	g := startGateway(t, accessConfig(t, `
admin:
  probe: {allow: [127.0.0.0/8]}
  scrape: {allow: [127.0.0.2/32]}
  operator: {allow: [127.0.0.1/32, "::1/128"]}
`), Options{})
	want := map[string]map[string]int{ // source -> path -> status
		"127.0.0.1": {"/healthz": 200, "/metrics": 403, "/api/stats": 200, "/debug/registry": 200, "/": 200, "/nope": 404, "/debug/pprof/": 404},
		"127.0.0.2": {"/healthz": 200, "/metrics": 200, "/api/stats": 403, "/debug/registry": 403, "/": 403, "/nope": 403, "/debug/pprof/": 403},
		"127.0.0.3": {"/healthz": 200, "/metrics": 403, "/api/stats": 403, "/debug/registry": 403, "/": 403, "/nope": 403, "/debug/pprof/": 403},
	}
	forbidden := 0
	for src, paths := range want {
		for path, status := range paths {
			a := ask(t, g, src, "GET", path)
			if a.status != status {
				t.Errorf("GET %s from %s: %d %.120q, want %d", path, src, a.status, a.body, status)
			}
			if status == http.StatusForbidden {
				forbidden++
				if !strings.Contains(a.body, "not open to "+src) || !strings.Contains(a.body, "allow") {
					t.Errorf("GET %s from %s: body %q does not say why", path, src, a.body)
				}
			}
		}
	}
	if got := refusedCount(t, g, "127.0.0.2", "admin_forbidden"); got != strconv.Itoa(forbidden) {
		t.Errorf("refused admin_forbidden = %q, want %d", got, forbidden)
	}

	if err := g.Reload(accessConfig(t, "admin:\n  operator: {allow: [127.0.0.3/32]}\n")); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if a := ask(t, g, "127.0.0.3", "GET", "/debug/registry"); a.status != http.StatusOK || !strings.Contains(a.body, `"slots"`) {
		t.Errorf("after reload, 127.0.0.3: %d %.120q", a.status, a.body)
	}
	if a := ask(t, g, "127.0.0.1", "GET", "/api/stats"); a.status != http.StatusForbidden {
		t.Errorf("after reload, 127.0.0.1: %d", a.status)
	}
}

// TestAdminTokens: a group with a token file wants "Authorization: Bearer
// <token>" (any case of "Bearer"); the operator may trade it for a cookie
// at POST /api/login. Rotating the file and reloading (what SIGHUP does)
// retires the old token and every cookie made from it; a reload whose
// token file is gone fails and changes nothing.
func TestAdminTokens(t *testing.T) {
	const scrapeTok, opTok, opTok2 = "scrape-0123456789abcdef", "operator-0123456789abcdef", "rotated-0123456789abcdef"
	opFile := tokenFile(t, opTok)
	doc := "admin:\n  scrape: {token_file: " + tokenFile(t, scrapeTok) + "}\n  operator: {token_file: " + opFile + "}\n"
	g := startGateway(t, accessConfig(t, doc), Options{})
	const src = "127.0.0.1"
	for _, tt := range []struct {
		method, path, header string
		status               int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/metrics", "", 401},
		{"GET", "/metrics", "Authorization: Bearer wrong-0123456789abcdef", 401},
		{"GET", "/metrics", "Authorization: Bearer " + opTok, 401},
		{"GET", "/metrics", "Authorization: Basic " + scrapeTok, 401},
		{"GET", "/metrics", "Authorization: Bearer " + scrapeTok, 200},
		{"GET", "/metrics", "Authorization: bearer " + scrapeTok, 200},
		{"GET", "/api/stats", "", 401},
		{"GET", "/debug/registry", "Authorization: Bearer " + scrapeTok, 401},
		{"GET", "/debug/registry", "Authorization: Bearer " + opTok, 200},
		{"GET", "/", "", 200}, // the page itself: it asks for the token
		{"POST", "/api/login", "", 401},
	} {
		a := ask(t, g, src, tt.method, tt.path, tt.header)
		if a.status != tt.status {
			t.Errorf("%s %s [%s]: %d %.120q, want %d", tt.method, tt.path, tt.header, a.status, a.body, tt.status)
		}
		if a.status == http.StatusUnauthorized && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s %s: 401 without a Bearer challenge: %v", tt.method, tt.path, a.header)
		}
	}

	login := ask(t, g, src, "POST", "/api/login", "Authorization: Bearer "+opTok)
	cookie := loginCookie(t, login)
	if a := ask(t, g, src, "GET", "/api/stats", "Cookie: "+cookie); a.status != http.StatusOK || !strings.Contains(a.body, `"open"`) {
		t.Errorf("/api/stats with the cookie: %d %.120q", a.status, a.body)
	}
	forged := cookie[:len(cookie)-2] + "AA"
	if a := ask(t, g, src, "GET", "/api/stats", "Cookie: "+forged); a.status != http.StatusUnauthorized {
		t.Errorf("/api/stats with a forged cookie: %d", a.status)
	}
	if a := ask(t, g, src, "GET", "/metrics", "Cookie: "+cookie); a.status != http.StatusUnauthorized {
		t.Errorf("/metrics with the operator's cookie: %d, want 401 (cookies are the operator's only)", a.status)
	}

	// Rotate the token: the same file, new contents, and a reload.
	if err := os.WriteFile(opFile, []byte(opTok2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(accessConfig(t, doc)); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	for _, h := range []string{"Authorization: Bearer " + opTok, "Cookie: " + cookie} {
		if a := ask(t, g, src, "GET", "/api/stats", h); a.status != http.StatusUnauthorized {
			t.Errorf("after rotation, %s: %d, want 401", h[:12], a.status)
		}
	}
	if a := ask(t, g, src, "GET", "/api/stats", "Authorization: Bearer "+opTok2); a.status != http.StatusOK {
		t.Errorf("after rotation, the new token: %d", a.status)
	}
	os.Remove(opFile)
	if err := g.Reload(accessConfig(t, doc)); err == nil || !strings.Contains(err.Error(), "operator.token_file") {
		t.Errorf("reload with the token file gone: %v, want an error naming admin.operator.token_file", err)
	}
	if a := ask(t, g, src, "GET", "/api/stats", "Authorization: Bearer "+opTok2); a.status != http.StatusOK {
		t.Errorf("a failed reload changed the rules: %d", a.status)
	}
	if got := refusedCount(t, g, src, "admin_unauthorized", "Authorization: Bearer "+scrapeTok); got == "" || got == "0" {
		t.Errorf("refused admin_unauthorized = %q", got)
	}
}

// loginCookie checks a login answer and returns "name=value" of its
// cookie.
func loginCookie(t *testing.T, a answer) string {
	t.Helper()
	if a.status != http.StatusNoContent {
		t.Fatalf("login: %d %q", a.status, a.body)
	}
	resp := http.Response{Header: a.header}
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge <= 0 {
				t.Errorf("cookie attributes: %+v", c)
			}
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("login set no %s cookie: %v", cookieName, a.header)
	return ""
}

// TestAdminOperatorWebSocket: the dashboard's live feed is the WebSocket
// that devices use too, so the operator group covers what only operators
// see on it: the gateway's "$SYS" topics. A session whose handshake
// passes the operator rules (source, and the token as a Bearer header or
// as the login cookie, which is what a browser sends) gets the stats;
// others get {"op":"error","code":"forbidden"} and their ordinary topics.
// Rotating the token ends the operator sessions with 1008. Fails before
// this commit: any WebSocket client got the stats.
func TestAdminOperatorWebSocket(t *testing.T) {
	const tok, tok2 = "operator-0123456789abcdef", "rotated-0123456789abcdef"
	file := tokenFile(t, tok)
	doc := "admin:\n  operator: {allow: [127.0.0.1/32], token_file: " + file + "}\n"
	g := startGateway(t, accessConfig(t, doc), Options{})
	cookie := loginCookie(t, ask(t, g, "127.0.0.1", "POST", "/api/login", "Authorization: Bearer "+tok))

	for _, tt := range []struct {
		name, src string
		header    http.Header
	}{
		{"no token", "127.0.0.1", nil},
		{"wrong token", "127.0.0.1", http.Header{"Authorization": {"Bearer wrong-0123456789abcdef"}}},
		{"token from another source", "127.0.0.2", http.Header{"Authorization": {"Bearer " + tok}}},
		{"cookie from another source", "127.0.0.2", http.Header{"Cookie": {cookie}}},
	} {
		ws := wsFrom(t, g, tt.src, tt.header)
		ws.WriteJSON(map[string]string{"op": "sub", "topic": StatsTopic})
		if m := wsNext(t, ws); m["op"] != "error" || m["code"] != "forbidden" {
			t.Errorf("%s: got %v, want a forbidden error", tt.name, m)
		}
	}
	device := wsFrom(t, g, "127.0.0.2", nil)
	device.WriteJSON(map[string]string{"op": "sub", "topic": "plant/#"})
	device.WriteJSON(map[string]string{"op": "ping"})
	if m := wsNext(t, device); m["op"] != "pong" {
		t.Fatalf("device: %v", m)
	}

	byToken := wsFrom(t, g, "127.0.0.1", http.Header{"Authorization": {"Bearer " + tok}})
	byCookie := wsFrom(t, g, "127.0.0.1", http.Header{"Cookie": {cookie}})
	for _, ws := range []*websocket.Conn{byToken, byCookie} {
		ws.WriteJSON(map[string]string{"op": "sub", "topic": StatsTopic})
		if m := wsNext(t, ws); m["topic"] != StatsTopic {
			t.Errorf("operator: got %v, want the stats", m)
		}
	}
	g.Bus().Publish("plant/line1/temp", []byte("21.5"), "test")
	if m := wsNext(t, device); m["topic"] != "plant/line1/temp" {
		t.Errorf("device: got %v, want its own topic", m)
	}

	// Rotate the token: the operator sessions close with 1008 at their
	// next delivery (the stats come every second); the device's stays.
	if err := os.WriteFile(file, []byte(tok2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(accessConfig(t, doc)); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	for _, ws := range []*websocket.Conn{byToken, byCookie} {
		var err error
		for err == nil {
			ws.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, _, err = ws.ReadMessage()
		}
		if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
			t.Errorf("operator session after rotation: %v, want close 1008", err)
		}
	}
	device.WriteJSON(map[string]string{"op": "ping"})
	if m := wsNext(t, device); m["op"] != "pong" {
		t.Errorf("device after the reload: %v", m)
	}
}

// wsFrom opens a WebSocket to the gateway from src, offering edgemux.v1.
func wsFrom(t *testing.T, g *Gateway, src string, header http.Header) *websocket.Conn {
	t.Helper()
	d := &websocket.Dialer{
		Subprotocols: []string{"edgemux.v1"}, HandshakeTimeout: 10 * time.Second,
		NetDial: func(network, addr string) (net.Conn, error) {
			nd := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
			return nd.Dial(network, addr)
		},
	}
	ws, _, err := d.Dial("ws://"+g.Addr().String()+"/ws", header)
	if err != nil {
		t.Fatalf("WebSocket from %s: %v", src, err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// wsNext reads the next JSON message's top-level string fields.
func wsNext(t *testing.T, ws *websocket.Conn) map[string]string {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var m map[string]any
	if err := ws.ReadJSON(&m); err != nil {
		t.Fatalf("read: %v", err)
	}
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
