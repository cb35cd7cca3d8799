package dashboard

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	return rec
}

func TestHandlerRoutes(t *testing.T) {
	tests := []struct {
		method, path string
		status       int
		page         bool
	}{
		{"GET", "/", http.StatusOK, true},
		{"GET", "/index.html", http.StatusOK, true},
		{"HEAD", "/", http.StatusOK, false},
		{"GET", "/favicon.ico", http.StatusNotFound, false},
		{"GET", "/index.htm", http.StatusNotFound, false},
		{"POST", "/", http.StatusMethodNotAllowed, false},
		{"DELETE", "/index.html", http.StatusMethodNotAllowed, false},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec := serve(t, tc.method, tc.path, nil)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			if tc.page != bytes.Equal(rec.Body.Bytes(), page) {
				t.Fatalf("body is the page: %v, want %v", !tc.page, tc.page)
			}
			if tc.status == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != "GET, HEAD" {
				t.Fatalf("Allow = %q", rec.Header().Get("Allow"))
			}
		})
	}
}

func TestHandlerHeaders(t *testing.T) {
	rec := serve(t, "GET", "/", nil)
	h := rec.Header()
	want := map[string]string{
		"Content-Type":           "text/html; charset=utf-8",
		"X-Content-Type-Options": "nosniff",
		"X-Frame-Options":        "DENY",
		"Cache-Control":          "no-cache",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	csp := h.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP %q lacks %q", csp, d)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "*") {
		t.Errorf("CSP is not strict: %q", csp)
	}
	script, _ := InlineBlock(page, "script")
	style, _ := InlineBlock(page, "style")
	if !strings.Contains(csp, "script-src "+hashSource(script)) || !strings.Contains(csp, "style-src "+hashSource(style)) {
		t.Errorf("CSP %q does not carry the inline blocks' hashes", csp)
	}
}

func TestHandlerETag(t *testing.T) {
	etag := serve(t, "GET", "/", nil).Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	rec := serve(t, "GET", "/", map[string]string{"If-None-Match": etag})
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Fatalf("revalidation: %d with %d bytes", rec.Code, rec.Body.Len())
	}
}

// The page must never turn data into markup: the one rule that keeps a
// topic named "<img onerror=...>" a topic name.
func TestPageBuildsNoMarkupFromData(t *testing.T) {
	for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if bytes.Contains(page, []byte(banned)) {
			t.Errorf("index.html uses %s", banned)
		}
	}
	// Nothing from elsewhere: no CDN, no external script, style or font.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).Find(page); m != nil {
		t.Errorf("index.html loads something external: %s", m)
	}
	for _, s := range []string{`"/api/stats"`, `"edgemux.v1"`, `"$SYS/edgemux/stats"`, `"/ws"`} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("index.html does not mention %s", s)
		}
	}
}

var inlineTests = []struct {
	name, page, tag, want string
	err                   error
}{
	{"one", "<p><script>x()</script></p>", "script", "x()", nil},
	{"empty", "<style></style>", "style", "", nil},
	{"multiline", "<script>\na\nb\n</script>", "script", "\na\nb\n", nil},
	{"none", "<p>hi</p>", "script", "", ErrNoBlock},
	{"unclosed", "<script>x()", "script", "", ErrNoBlock},
	{"attributes are not bare", `<script src="a.js"></script>`, "script", "", ErrNoBlock},
	{"two", "<script>a</script><script>b</script>", "script", "", ErrManyBlocks},
	{"other tag ignored", "<style>s</style><script>j</script>", "style", "s", nil},
}

func TestInlineBlock(t *testing.T) {
	for _, tc := range inlineTests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := InlineBlock([]byte(tc.page), tc.tag)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err == nil && string(got) != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBrokenPageServes500(t *testing.T) {
	h := buildHandler([]byte("<p>no script</p>"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "dashboard:") {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
}

func FuzzInlineBlock(f *testing.F) {
	for _, tc := range inlineTests {
		f.Add([]byte(tc.page), tc.tag)
	}
	f.Fuzz(func(t *testing.T, page []byte, tag string) {
		got, err := InlineBlock(page, tag)
		if err != nil {
			return
		}
		if !bytes.Contains(page, []byte("<"+tag+">"+string(got)+"</"+tag+">")) {
			t.Fatalf("block %q is not between <%s> and </%s> in the page", got, tag, tag)
		}
	})
}
