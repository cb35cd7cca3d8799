package websocket

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/edgemux/edgemux/protocols"
)

// headerEnd returns the length of the HTTP header block at the start of p,
// through the empty line that ends it (CRLF or bare LF, as net/textproto
// reads), or 0 while the block is incomplete.
func headerEnd(p []byte) int {
	for i := 0; i < len(p); {
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			return 0
		}
		k := i + j + 1 // just after the line's LF
		switch {
		case k < len(p) && p[k] == '\n':
			return k + 1
		case k+1 < len(p) && p[k] == '\r' && p[k+1] == '\n':
			return k + 2
		}
		i = k
	}
	return 0
}

// handshake collects the HTTP request, checks its path and upgrades it.
// It consumes nothing until the header block is complete; any bytes after
// it are frames, for the next call.
func (s *session) handshake(in []byte) (int, error) {
	limit := s.cfg().MaxHeaderBytes
	end := headerEnd(in[:min(len(in), limit)])
	if end == 0 {
		if len(in) < limit {
			return 0, nil
		}
		s.h.n.headerTooLarge.Add(1)
		s.httpError(http.StatusRequestHeaderFieldsTooLarge, "request header block over "+strconv.Itoa(limit)+" bytes")
		return 0, fmt.Errorf("%w (limit %d): %w", ErrHeaderTooLarge, limit, protocols.ErrMalformed)
	}
	hr := s.h.requests.get()
	defer s.h.requests.put(hr)
	req := &hr.req
	switch err := hr.parse(in[:end], s.cfg().Path); {
	case err != nil:
		return end, s.refuse(http.StatusBadRequest, fmt.Errorf("%w: %w: %w", ErrBadRequest, protocols.ErrMalformed, err))
	case hasBody(req.Header):
		// A body would be taken for frames: no handshake carries one.
		return end, s.refuse(http.StatusBadRequest, fmt.Errorf("%w: %w: request with a body", ErrBadRequest, protocols.ErrMalformed))
	case req.URL.Path != s.cfg().Path:
		s.h.n.notFound.Add(1)
		return end, s.refuse(http.StatusNotFound, fmt.Errorf("%w: %q", ErrNotFound, req.URL.Path))
	}
	return end, s.upgrade(req)
}

// hasBody reports whether the request announces a body: a Content-Length
// other than 0 (the parser let through only digits, and refused any
// Transfer-Encoding).
func hasBody(h http.Header) bool {
	for _, v := range h["Content-Length"] {
		if strings.TrimLeft(v, "0") != "" {
			return true
		}
	}
	return false
}

// upgrade runs gorilla's Upgrader over the Hijacker shim. On failure the
// Upgrader's Error func (Handler.handshakeError) has answered already.
func (s *session) upgrade(req *http.Request) error {
	shim := &responseShim{l: s.l}
	ws, err := s.l.set.upgrader.Upgrade(shim, req, nil)
	if err != nil {
		s.closing = true
		if shim.status == http.StatusForbidden {
			return fmt.Errorf("%w: %q", ErrForbidden, req.Header.Get("Origin"))
		}
		return fmt.Errorf("%w: %w: %w", ErrBadRequest, protocols.ErrMalformed, err)
	}
	// The staged output is exactly the 101 response: it says whether
	// gorilla agreed to permessage-deflate, which RSV1 then may announce.
	s.scan.Deflate = bytes.Contains(s.l.out, []byte("\r\nSec-WebSocket-Extensions: permessage-deflate"))
	s.upgraded = true
	s.operator = s.h.operatorEpoch(s.conn.Peer(), req.Header)
	s.h.adopt(s.l, ws, s.scan.Deflate)
	s.h.n.upgrades.Add(1)
	s.conn.SetTimer(s.cfg().PingInterval)
	return nil
}

// handshakeError is the Upgrader's Error func: it answers on the session
// behind the shim and counts the refusal.
func (h *Handler) handshakeError(w http.ResponseWriter, _ *http.Request, status int, reason error) {
	shim, ok := w.(*responseShim)
	if !ok {
		return
	}
	shim.status = status
	if status == http.StatusForbidden {
		h.n.forbidden.Add(1)
	} else {
		h.n.badRequests.Add(1)
	}
	shim.l.s.httpError(status, reason.Error())
}

// refuse answers the request with status and returns err.
func (s *session) refuse(status int, err error) error {
	if status == http.StatusBadRequest {
		s.h.n.badRequests.Add(1)
	}
	s.httpError(status, err.Error())
	return err
}

// httpError stages a complete HTTP error response and marks the session
// closing: the connection is closed after it is written.
func (s *session) httpError(status int, msg string) {
	b := s.l.out
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"...)
	if status == http.StatusBadRequest {
		b = append(b, "Sec-WebSocket-Version: 13\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(msg)+1), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, msg...)
	b = append(b, '\n')
	s.l.out = b
	s.closing = true
}

// responseShim is the http.ResponseWriter gorilla's Upgrader gets: it
// hijacks to the lease and the lease's bufio pair. Errors are answered by
// handshakeError, so the writer methods only have to exist.
type responseShim struct {
	l      *lease
	header http.Header
	status int
}

var _ http.Hijacker = (*responseShim)(nil)

func (r *responseShim) Header() http.Header {
	if r.header == nil {
		r.header = make(http.Header)
	}
	return r.header
}

func (r *responseShim) Write(p []byte) (int, error) { return len(p), nil }

func (r *responseShim) WriteHeader(status int) { r.status = status }

// Hijack hands over the wire: gorilla writes the 101 through the lease,
// keeps it as its net.Conn and the lease's reader as its read buffer; the
// writer's buffer it only borrows during Upgrade.
func (r *responseShim) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if r.l.ws != nil {
		return nil, nil, errors.New("websocket: already upgraded")
	}
	return r.l, r.l.rw, nil
}
