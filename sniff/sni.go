package sniff

import (
	"errors"
	"fmt"
	"strings"
)

// Errors from TLSServerName.
var (
	// ErrNotClientHello: the bytes are not TLS handshake records carrying a
	// ClientHello.
	ErrNotClientHello = errors.New("sniff: not a TLS ClientHello")
	// ErrMalformedHello: a ClientHello whose fields contradict each other.
	ErrMalformedHello = errors.New("sniff: malformed TLS ClientHello")
	// ErrHelloTooLarge: a ClientHello over the 64 KiB this package reads.
	ErrHelloTooLarge = errors.New("sniff: TLS ClientHello too large")
)

// TLSServerName parses the ClientHello at the start of p and returns the
// server name it asks for (SNI host_name, lower-cased, a trailing dot
// dropped), or "" when it names none. While the ClientHello is incomplete it
// returns need > 0, the total length of p needed at least to go on (more
// may follow, when the message spans several records). Malformed input is an
// error wrapping ErrNotClientHello, ErrMalformedHello or ErrHelloTooLarge.
func TLSServerName(p []byte) (name string, need int, err error) {
	msg, need, err := clientHelloMessage(p)
	if err != nil || need > 0 {
		return "", need, err
	}
	name, err = clientHelloServerName(msg[tlsHandshakeHdrLen:])
	return name, 0, err
}

// tlsRecord validates the record header at p[off:] and returns its payload
// and where the next record starts, or need > 0 when p ends before it does.
func tlsRecord(p []byte, off int) (payload []byte, next, need int, err error) {
	if len(p) < off+tlsRecordHeaderLen {
		return nil, 0, off + tlsRecordHeaderLen, nil
	}
	h := p[off : off+tlsRecordHeaderLen]
	if h[0] != tlsRecordHandshake || h[1] != 3 || h[2] > tlsMaxMinorVersion {
		return nil, 0, 0, fmt.Errorf("%w: record header % x at offset %d", ErrNotClientHello, h[:3], off)
	}
	n := int(h[3])<<8 | int(h[4])
	if n == 0 || n > tlsMaxRecord {
		return nil, 0, 0, fmt.Errorf("%w: record length %d", ErrMalformedHello, n)
	}
	next = off + tlsRecordHeaderLen + n
	if len(p) < next {
		return nil, 0, next, nil
	}
	return p[off+tlsRecordHeaderLen : next], next, 0, nil
}

// clientHelloMessage returns the whole ClientHello handshake message,
// header included. It is a slice of p when the message sits in the first
// record (the usual case) and a reassembled copy when it spans records.
func clientHelloMessage(p []byte) (msg []byte, need int, err error) {
	var hdr [tlsHandshakeHdrLen]byte
	var first []byte
	filled, got, want, off := 0, 0, 0, 0
	for want == 0 || got < want {
		payload, next, need, err := tlsRecord(p, off)
		if err != nil || need > 0 {
			return nil, need, err
		}
		if off == 0 {
			first = payload
		}
		filled += copy(hdr[filled:], payload)
		got += len(payload)
		off = next
		if want == 0 && filled == len(hdr) {
			if want, err = clientHelloLength(hdr); err != nil {
				return nil, 0, err
			}
		}
	}
	if len(first) >= want {
		return first[:want], 0, nil
	}
	return reassemble(p, off, want), 0, nil
}

// clientHelloLength checks the handshake header and returns the length of
// the whole message, header included.
func clientHelloLength(hdr [tlsHandshakeHdrLen]byte) (int, error) {
	if hdr[0] != tlsHandshakeClient {
		return 0, fmt.Errorf("%w: handshake type %d", ErrNotClientHello, hdr[0])
	}
	n := int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
	if n > tlsMaxClientHello {
		return 0, fmt.Errorf("%w: %d bytes", ErrHelloTooLarge, n)
	}
	return tlsHandshakeHdrLen + n, nil
}

// reassemble concatenates the payloads of the records in p[:end], already
// validated, and returns the first want bytes.
func reassemble(p []byte, end, want int) []byte {
	buf := make([]byte, 0, want)
	for off := 0; off < end && len(buf) < want; {
		n := int(p[off+3])<<8 | int(p[off+4])
		payload := p[off+tlsRecordHeaderLen : off+tlsRecordHeaderLen+n]
		buf = append(buf, payload[:min(len(payload), want-len(buf))]...)
		off += tlsRecordHeaderLen + n
	}
	return buf
}

// clientHelloServerName walks a ClientHello body (RFC 8446 4.1.2) to its
// extensions and returns the server_name extension's host name.
func clientHelloServerName(body []byte) (string, error) {
	r := byteReader{b: body}
	r.skip(2 + 32) // legacy_version, random
	sessionID := r.vec8()
	suites := r.vec16()
	compression := r.vec8()
	switch {
	case r.bad:
		return "", fmt.Errorf("%w: truncated before extensions", ErrMalformedHello)
	case len(sessionID) > 32:
		return "", fmt.Errorf("%w: session id of %d bytes", ErrMalformedHello, len(sessionID))
	case len(suites) < 2 || len(suites)%2 != 0:
		return "", fmt.Errorf("%w: cipher suites of %d bytes", ErrMalformedHello, len(suites))
	case len(compression) < 1:
		return "", fmt.Errorf("%w: no compression methods", ErrMalformedHello)
	case r.empty():
		return "", nil // no extensions at all (an SSL 3 style hello)
	}
	extensions := r.vec16()
	if r.bad || !r.empty() {
		return "", fmt.Errorf("%w: extensions block length", ErrMalformedHello)
	}
	return serverNameExtension(extensions)
}

// serverNameExtension finds the server_name extension (type 0) among the
// extensions and decodes it; "" when there is none.
func serverNameExtension(extensions []byte) (string, error) {
	r := byteReader{b: extensions}
	name, seen := "", false
	for !r.empty() {
		typ := r.u16()
		data := r.vec16()
		if r.bad {
			return "", fmt.Errorf("%w: truncated extension", ErrMalformedHello)
		}
		if typ != 0 {
			continue
		}
		if seen {
			return "", fmt.Errorf("%w: server_name extension twice", ErrMalformedHello)
		}
		seen = true
		var err error
		if name, err = serverNameList(data); err != nil {
			return "", err
		}
	}
	return name, nil
}

// serverNameList decodes a ServerNameList (RFC 6066 section 3) and returns
// its host_name entry.
func serverNameList(data []byte) (string, error) {
	r := byteReader{b: data}
	list := r.vec16()
	if r.bad || !r.empty() || len(list) == 0 {
		return "", fmt.Errorf("%w: server_name list length", ErrMalformedHello)
	}
	r = byteReader{b: list}
	var host []byte
	found := false
	for !r.empty() {
		nameType := r.u8()
		entry := r.vec16()
		if r.bad {
			return "", fmt.Errorf("%w: truncated server name", ErrMalformedHello)
		}
		if nameType != 0 {
			continue // not host_name: unknown types are skipped
		}
		if found {
			return "", fmt.Errorf("%w: two host names", ErrMalformedHello)
		}
		host, found = entry, true
	}
	if !found {
		return "", nil
	}
	return hostName(host)
}

// hostName checks a host_name's characters and returns it lower-cased
// without a trailing dot, so routes can compare it with their SNI patterns.
func hostName(host []byte) (string, error) {
	if len(host) > 0 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	if len(host) == 0 || len(host) > tlsMaxServerNameLen {
		return "", fmt.Errorf("%w: host name of %d bytes", ErrMalformedHello, len(host))
	}
	for _, c := range host {
		if !hostNameByte(c) {
			return "", fmt.Errorf("%w: byte %#x in host name", ErrMalformedHello, c)
		}
	}
	return strings.ToLower(string(host)), nil
}

// hostNameByte reports whether c may appear in a DNS host name; underscore
// is allowed because real deployments use it.
func hostNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_'
}

// byteReader reads big-endian fields; once a read runs past the end, bad is
// set and every later read returns zero values.
type byteReader struct {
	b   []byte
	bad bool
}

func (r *byteReader) empty() bool { return len(r.b) == 0 }

func (r *byteReader) take(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *byteReader) skip(n int) { r.take(n) }

func (r *byteReader) u8() int {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (r *byteReader) u16() int {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int(b[0])<<8 | int(b[1])
}

func (r *byteReader) vec8() []byte  { return r.take(r.u8()) }
func (r *byteReader) vec16() []byte { return r.take(r.u16()) }
