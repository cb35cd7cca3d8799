package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/edgemux/edgemux/config"
)

// Access control for the admin endpoints. Every admin request belongs to
// one of three groups by its path: probe (/healthz), scrape (/metrics)
// and operator (everything else: /api/, /debug/, the dashboard). A group
// admits a request when its source address is in the group's allow list
// and, when the group has a token, the request carries it: as
// "Authorization: Bearer <token>", or, for the operator group only, as
// the cookie the dashboard gets from POST /api/login (browsers cannot
// put an Authorization header on a WebSocket handshake, but they do send
// cookies). The same operator rules decide which WebSocket sessions may
// subscribe to the gateway's own "$" topics (its stats).

// group is an access group.
type group uint8

const (
	groupProbe group = iota
	groupScrape
	groupOperator
	groupCount
)

var groupNames = [groupCount]string{"probe", "scrape", "operator"}

func (g group) String() string { return groupNames[g] }

// groupOf says which group a request path belongs to: anything not named
// is an operator's, so a new endpoint is closed until someone opens it.
func groupOf(path string) group {
	switch path {
	case "/healthz":
		return groupProbe
	case "/metrics":
		return groupScrape
	}
	return groupOperator
}

// Operator cookies: "<expiry unix seconds>.<MAC>", the MAC an HMAC-SHA256
// under a key drawn at start over the expiry and the token's digest. So a
// cookie reveals nothing of the token, dies with the process, and dies
// when the token changes.
const (
	cookieName     = "edgemux_operator"
	cookieLifetime = 12 * time.Hour
	cookieLabel    = "edgemux operator cookie v1"
	maxCookieValue = 128
)

// access is the compiled admin access configuration; Reload swaps it
// whole, so a request sees one version of it.
type access struct {
	groups    [groupCount]accessGroup
	cookieKey []byte // drawn once per gateway; shared by every version
}

type accessGroup struct {
	allow    []netip.Prefix
	hasToken bool
	token    [sha256.Size]byte // the token's digest: compared in constant time, whatever its length
}

// compileAccess reads the allow lists and token files of cfg.
func compileAccess(cfg config.Admin, cookieKey []byte) (*access, error) {
	a := &access{cookieKey: cookieKey}
	for i, g := range cfg.Groups() {
		allow, err := config.ParseAllow(g.Allow)
		if err != nil {
			return nil, fmt.Errorf("gateway: admin.%s.%w", g.Name, err)
		}
		ag := accessGroup{allow: allow}
		if g.TokenFile != "" {
			tok, err := config.ReadToken(g.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("gateway: admin.%s.token_file: %w", g.Name, err)
			}
			ag.hasToken, ag.token = true, sha256.Sum256([]byte(tok))
		}
		a.groups[i] = ag
	}
	return a, nil
}

// sourceAllowed reports whether ip may use group g at all.
func (a *access) sourceAllowed(g group, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range a.groups[g].allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// credentialed reports whether h carries what group g asks for: nothing
// when it has no token, else the bearer token or (operator) a live
// cookie.
func (a *access) credentialed(g group, h http.Header, now time.Time) bool {
	ag := &a.groups[g]
	if !ag.hasToken {
		return true
	}
	if tok, ok := bearer(h); ok {
		sum := sha256.Sum256([]byte(tok))
		return subtle.ConstantTimeCompare(sum[:], ag.token[:]) == 1
	}
	return g == groupOperator && a.cookieValid(h, now)
}

// admits is sourceAllowed and credentialed together.
func (a *access) admits(g group, peer netip.Addr, h http.Header, now time.Time) bool {
	return a.sourceAllowed(g, peer) && a.credentialed(g, h, now)
}

// bearer returns the token of the one Authorization header, if it is a
// Bearer one (the scheme is case-insensitive, RFC 9110 section 11.1).
func bearer(h http.Header) (string, bool) {
	v := h.Values("Authorization")
	if len(v) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(v[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	return tok, tok != ""
}

// cookie returns the operator's cookie, valid until now+cookieLifetime,
// or nil when the operator group has no token (then there is nothing to
// remember).
func (a *access) cookie(now time.Time) *http.Cookie {
	ag := &a.groups[groupOperator]
	if !ag.hasToken {
		return nil
	}
	exp := now.Add(cookieLifetime).Unix()
	return &http.Cookie{
		Name:     cookieName,
		Value:    strconv.FormatInt(exp, 10) + "." + a.cookieMAC(exp),
		Path:     "/",
		MaxAge:   int(cookieLifetime / time.Second),
		HttpOnly: true,                    // scripts never see it
		SameSite: http.SameSiteStrictMode, // nor does any other site's page send it
	}
}

func (a *access) cookieMAC(exp int64) string {
	m := hmac.New(sha256.New, a.cookieKey)
	m.Write([]byte(cookieLabel))
	m.Write([]byte(strconv.FormatInt(exp, 10)))
	m.Write(a.groups[groupOperator].token[:])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// cookieValid finds the operator cookie in h and checks its MAC and
// expiry. Only the first cookie of that name counts.
func (a *access) cookieValid(h http.Header, now time.Time) bool {
	if len(h["Cookie"]) == 0 {
		return false
	}
	c, err := (&http.Request{Header: h}).Cookie(cookieName)
	if err != nil || len(c.Value) > maxCookieValue {
		return false
	}
	expText, mac, ok := strings.Cut(c.Value, ".")
	exp, err := strconv.ParseInt(expText, 10, 64)
	if !ok || err != nil || now.Unix() >= exp || exp > now.Add(cookieLifetime).Unix() {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(a.cookieMAC(exp)))
}

// sameOperator reports whether b admits exactly the operators a does:
// then a reload need not end the operator sessions a admitted.
func (a *access) sameOperator(b *access) bool {
	x, y := &a.groups[groupOperator], &b.groups[groupOperator]
	if x.hasToken != y.hasToken || x.token != y.token || len(x.allow) != len(y.allow) {
		return false
	}
	for i := range x.allow {
		if x.allow[i] != y.allow[i] {
			return false
		}
	}
	return true
}
