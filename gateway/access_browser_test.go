package gateway

import (
	"strconv"
	"testing"
)

// TestBrowserDashboardLogin: with an operator token configured, the
// dashboard in headless chromium shows no statistics and asks for the
// token; a wrong one is refused; the right one is traded for the login
// cookie, which the page's script cannot read (HttpOnly) and which the
// browser then sends on the WebSocket handshake, so the live stats flow.
func TestBrowserDashboardLogin(t *testing.T) {
	const tok = "operator-0123456789abcdef"
	g := startGateway(t, accessConfig(t, "admin:\n  operator: {token_file: "+tokenFile(t, tok)+"}\n"), Options{})
	page := startBrowser(t).page(t)
	page.navigate("http://"+g.Addr().String()+"/", 1600, 1000)
	page.waitTrue("the dashboard script", `!!(window.edgemuxDashboard && window.edgemuxDashboard.ready)`)
	page.waitTrue("the login bar", `!document.getElementById("login").hidden`)
	var seen int
	if err := page.eval(`window.edgemuxDashboard.statsSeen`, &seen); err != nil || seen != 0 {
		t.Fatalf("stats seen before login: %d (%v)", seen, err)
	}

	signIn := func(token string) {
		t.Helper()
		var ok bool
		js := `(() => { document.getElementById("token").value = ` + strconv.Quote(token) + `;
			document.getElementById("login-btn").click(); return true; })()`
		if err := page.eval(js, &ok); err != nil || !ok {
			t.Fatalf("sign in: %v", err)
		}
	}
	signIn("wrong-0123456789abcdef")
	page.waitTrue("the wrong token refused", `document.getElementById("login-msg").textContent.startsWith("Wrong token")`)
	signIn(tok)
	page.waitTrue("the login bar gone", `document.getElementById("login").hidden`)
	page.waitTrue("the connected status", `document.getElementById("status").textContent === "connected"`)
	// Polling stops while the WebSocket is up: stats that keep coming
	// after it connected come over it.
	page.waitTrue("live stats over the WebSocket", `window.edgemuxDashboard.statsSeen >= 4 && document.getElementById("status").textContent === "connected"`)
	var cookies string
	if err := page.eval(`document.cookie`, &cookies); err != nil || cookies != "" {
		t.Errorf("the page's script sees cookies %q (%v): the login cookie must be HttpOnly", cookies, err)
	}
}
