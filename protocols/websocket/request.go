package websocket

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
)

// The handshake request is parsed here, not by http.ReadRequest. A
// handshake is the only HTTP request a WebSocket connection ever sends,
// and all the Upgrader looks at is the method, a few headers and the Host;
// http.ReadRequest builds the whole request, every header canonicalised
// into a fresh map, and left about 1.1 KB of garbage per connection, half
// of all a handshake allocated. With many connections opening at once
// that garbage sets how far the heap grows between collections, and the
// resident memory after them. This parser is stricter than net/http (no
// obs-fold, HTTP/1.1 only, no control bytes anywhere) and fills a pooled
// http.Request with only the headers below; FuzzParseRequest checks that
// whatever it accepts, http.ReadRequest reads the same way.

// keptHeaders are the request headers the upgrade reads, in canonical
// form (Authorization and Cookie for the operator check, handler.go); all
// others are checked for syntax and skipped. Host goes to
// Request.Host, as net/http puts it; Content-Length is kept after a check
// of its own, and Transfer-Encoding refused (a handshake has no body).
var keptHeaders = [...]string{
	"Connection", "Upgrade", "Sec-Websocket-Version", "Sec-Websocket-Key",
	"Sec-Websocket-Protocol", "Sec-Websocket-Extensions", "Origin",
	"Authorization", "Cookie",
}

// commonValues are header values browsers and libraries send; matching
// one reuses the constant instead of allocating a string.
var commonValues = [...]string{
	"Upgrade", "upgrade", "keep-alive, Upgrade", "websocket", "13", DefaultSubprotocol,
	"permessage-deflate", "permessage-deflate; client_max_window_bits", "0",
}

// errRequest is the reason a handshake request does not parse.
var errRequest = errors.New("malformed HTTP request")

// handshakeRequest is a reusable http.Request for one upgrade: its header
// map keeps its room between uses and its values live in vals.
type handshakeRequest struct {
	req  http.Request
	url  url.URL
	vals [16]string
	n    int // vals in use
}

// requestPool holds handshakeRequests; a Handler has one.
type requestPool struct{ pool sync.Pool }

func (p *requestPool) get() *handshakeRequest {
	if hr, ok := p.pool.Get().(*handshakeRequest); ok {
		return hr
	}
	hr := &handshakeRequest{}
	hr.req.Header = make(http.Header, len(keptHeaders))
	hr.req.URL = &hr.url
	return hr
}

// put forgets the request's strings and pools it.
func (p *requestPool) put(hr *handshakeRequest) {
	header := hr.req.Header
	clear(header)
	hr.req = http.Request{Header: header, URL: &hr.url}
	hr.url = url.URL{}
	hr.vals = [16]string{}
	hr.n = 0
	p.pool.Put(hr)
}

// parse reads the header block (request line through the empty line, as
// headerEnd measured it). path is the configured endpoint, reused as the
// request's path when it matches, so the common case does not allocate.
func (hr *handshakeRequest) parse(block []byte, path string) error {
	line, rest := nextLine(block)
	if err := hr.requestLine(line, path); err != nil {
		return err
	}
	for {
		line, rest = nextLine(rest)
		if len(line) == 0 {
			break
		}
		if err := hr.headerLine(line); err != nil {
			return err
		}
	}
	if hr.req.URL.Host != "" {
		hr.req.Host = hr.req.URL.Host // absolute-form: the target's host wins (RFC 9112 §3.2.2)
	}
	if hr.req.Host == "" {
		return fmt.Errorf("%w: no Host header", errRequest)
	}
	return nil
}

// nextLine splits off the first line, without its CRLF or bare LF.
func nextLine(p []byte) (line, rest []byte) {
	for i, c := range p {
		if c == '\n' {
			line, rest = p[:i], p[i+1:]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			return line, rest
		}
	}
	return p, nil
}

// requestLine parses "METHOD SP request-target SP HTTP/1.1".
func (hr *handshakeRequest) requestLine(line []byte, path string) error {
	method, line, ok1 := bytes.Cut(line, []byte{' '})
	target, version, ok2 := bytes.Cut(line, []byte{' '})
	switch {
	case !ok1 || !ok2 || len(method) == 0 || len(target) == 0:
		return fmt.Errorf("%w: request line is not METHOD TARGET VERSION", errRequest)
	case !isToken(method):
		return fmt.Errorf("%w: method is not a token", errRequest)
	case string(version) != "HTTP/1.1":
		return fmt.Errorf("%w: version %q: WebSocket needs HTTP/1.1", errRequest, version)
	}
	for _, c := range target {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("%w: control byte or space in the request target", errRequest)
		}
	}
	r := &hr.req
	r.Method = http.MethodGet
	if string(method) != http.MethodGet {
		r.Method = string(method)
	}
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	return hr.target(target, path)
}

// target sets the URL. An origin-form target without escapes ("/ws",
// "/ws?x=1") is split here; anything else goes to url.ParseRequestURI, as
// net/http does.
func (hr *handshakeRequest) target(t []byte, path string) error {
	if t[0] != '/' || bytes.IndexByte(t, '%') >= 0 {
		u, err := url.ParseRequestURI(string(t))
		if err != nil {
			return fmt.Errorf("%w: %w", errRequest, err)
		}
		hr.req.URL = u
		return nil
	}
	p, query, hasQuery := bytes.Cut(t, []byte{'?'})
	hr.url.Path = path
	if string(p) != path {
		hr.url.Path = string(p)
	}
	if hasQuery {
		hr.url.RawQuery = string(query)
		hr.url.ForceQuery = len(query) == 0
	}
	return nil
}

// headerLine parses "name: value" and keeps it if the upgrade reads it.
func (hr *handshakeRequest) headerLine(line []byte) error {
	if line[0] == ' ' || line[0] == '\t' {
		return fmt.Errorf("%w: folded header line", errRequest)
	}
	name, value, ok := bytes.Cut(line, []byte{':'})
	if !ok || len(name) == 0 || !isToken(name) {
		return fmt.Errorf("%w: header line is not NAME: VALUE", errRequest)
	}
	value = bytes.Trim(value, " \t")
	for _, c := range value {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return fmt.Errorf("%w: control byte in the value of %s", errRequest, name)
		}
	}
	if equalFold(name, "Host") {
		if len(value) == 0 {
			return fmt.Errorf("%w: empty Host header", errRequest)
		}
		if hr.req.Host != "" {
			return fmt.Errorf("%w: more than one Host header", errRequest)
		}
		hr.req.Host = string(value)
		return nil
	}
	switch {
	case equalFold(name, "Transfer-Encoding"):
		return fmt.Errorf("%w: Transfer-Encoding in a handshake", errRequest)
	case equalFold(name, "Content-Length"):
		return hr.contentLength(value)
	}
	for _, key := range keptHeaders {
		if equalFold(name, key) {
			hr.add(key, value)
			return nil
		}
	}
	return nil
}

// contentLength checks a Content-Length and keeps the first; a repeat
// must say the same, as net/http requires too.
func (hr *handshakeRequest) contentLength(value []byte) error {
	if len(value) == 0 || len(value) > 19 {
		return fmt.Errorf("%w: Content-Length %q", errRequest, value)
	}
	for _, c := range value {
		if c < '0' || c > '9' {
			return fmt.Errorf("%w: Content-Length %q", errRequest, value)
		}
	}
	if had := hr.req.Header["Content-Length"]; len(had) > 0 {
		if had[0] != string(value) {
			return fmt.Errorf("%w: conflicting Content-Length headers", errRequest)
		}
		return nil
	}
	hr.add("Content-Length", value)
	return nil
}

// add appends a value to the header key, its string stored in vals while
// they last.
func (hr *handshakeRequest) add(key string, value []byte) {
	v := intern(value)
	h := hr.req.Header
	if hr.n < len(hr.vals) && h[key] == nil {
		hr.vals[hr.n] = v
		h[key] = hr.vals[hr.n : hr.n+1 : hr.n+1]
		hr.n++
		return
	}
	h[key] = append(h[key], v)
}

// intern returns v as a string, a constant if it is a common value.
func intern(v []byte) string {
	for _, c := range commonValues {
		if string(v) == c {
			return c
		}
	}
	return string(v)
}

// equalFold compares an ASCII header name with a canonical key.
func equalFold(p []byte, s string) bool {
	if len(p) != len(s) {
		return false
	}
	for i, c := range p {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		d := s[i]
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// isToken reports whether p is an RFC 9110 token (methods, header names).
func isToken(p []byte) bool {
	for _, c := range p {
		if c >= 0x80 || !tokenByte[c] {
			return false
		}
	}
	return true
}

// tokenByte marks the tchar bytes: ALPHA, DIGIT and !#$%&'*+-.^_`|~.
var tokenByte = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
