// Package dashboard serves edgemux's live operator page: one HTML file with
// inline CSS and JavaScript, embedded in the binary (no build step, no CDN).
// The page reads GET /api/stats once, then follows the gateway over its
// WebSocket endpoint (/ws, subprotocol edgemux.v1). When the gateway asks
// operators for a token, the page shows a sign-in bar and trades the token
// for the HttpOnly cookie of POST /api/login, which its fetches and its
// WebSocket handshake then carry.
//
// The page is sent with a strict Content-Security-Policy: nothing loads
// from anywhere, the only scripts and styles allowed are the page's own
// inline blocks (by SHA-256 hash, computed here from the embedded file, so
// editing index.html never needs a hash updated by hand), and connections
// go to the same origin only ('self' covers ws:// and wss:// to the same
// host and port under CSP Level 3).
package dashboard

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

//go:embed index.html
var page []byte

// Errors of the inline-block extraction.
var (
	ErrNoBlock    = errors.New("dashboard: inline block not found")
	ErrManyBlocks = errors.New("dashboard: more than one inline block")
)

// maxBlocks bounds the scan of a page for inline blocks.
const maxBlocks = 64

// Handler serves the dashboard at "/" and "/index.html" (GET and HEAD);
// any other path is 404 and any other method 405. Mount it at "/".
func Handler() http.Handler { return handler }

var handler = buildHandler(page)

type pageHandler struct {
	body []byte
	etag string
	csp  string
}

// buildHandler never fails: a page without its inline blocks is a build
// defect (the package's tests catch it), served as a 500 that says why
// rather than a panic at start-up.
func buildHandler(body []byte) http.Handler {
	h, err := newHandler(body)
	if err != nil {
		msg := err.Error()
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, msg, http.StatusInternalServerError)
		})
	}
	return h
}

func newHandler(body []byte) (*pageHandler, error) {
	script, err := InlineBlock(body, "script")
	if err != nil {
		return nil, err
	}
	style, err := InlineBlock(body, "style")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	return &pageHandler{
		body: body,
		etag: `"` + hex.EncodeToString(sum[:8]) + `"`,
		csp:  Policy(hashSource(script), hashSource(style)),
	}, nil
}

// Policy is the Content-Security-Policy for a page whose only script and
// style are the inline blocks with the given CSP hash sources.
func Policy(scriptHash, styleHash string) string {
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + scriptHash,
		"style-src " + styleHash,
		"connect-src 'self'",
		"img-src data:",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

func hashSource(block []byte) string {
	sum := sha256.Sum256(block)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// InlineBlock returns the text between "<tag>" and "</tag>" (a bare opening
// tag, no attributes), which must occur exactly once in page: that text is
// what a browser hashes for CSP.
func InlineBlock(page []byte, tag string) ([]byte, error) {
	open, end := []byte("<"+tag+">"), []byte("</"+tag+">")
	var found []byte
	n := 0
	for rest := page; n < maxBlocks; {
		i := bytes.Index(rest, open)
		if i < 0 {
			break
		}
		rest = rest[i+len(open):]
		j := bytes.Index(rest, end)
		if j < 0 {
			return nil, fmt.Errorf("%w: <%s> is not closed", ErrNoBlock, tag)
		}
		found, rest = rest[:j], rest[j+len(end):]
		n++
	}
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: <%s>", ErrNoBlock, tag)
	case n > 1:
		return nil, fmt.Errorf("%w: <%s>", ErrManyBlocks, tag)
	}
	return found, nil
}

func (h *pageHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" && r.URL.Path != "/index.html" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	// Revalidate on every load so an upgraded gateway serves its own page.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", h.etag)
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(h.body))
}
