package sniff

import "bytes"

// HTTPUpgrade tells a WebSocket opening handshake from a plain HTTP request
// once the whole header block (up to the blank line, "\r\n\r\n") is in p:
// websocket is true for a GET whose Upgrade header lists "websocket" and
// whose Connection header lists "upgrade" (names and values compared
// case-insensitively, list members separated by commas). need is true, and
// websocket false, while the header block is incomplete; the caller's byte
// budget bounds the wait. Everything else, such as the request target and
// the version, is the WebSocket handler's to check. It does not allocate.
func HTTPUpgrade(p []byte) (websocket bool, need bool) {
	end := bytes.Index(p, []byte("\r\n\r\n"))
	if end < 0 {
		return false, true
	}
	requestLine, headers := cutLine(p[:end+2])
	if !bytes.HasPrefix(requestLine, []byte("GET ")) {
		return false, false
	}
	upgrade, connection := false, false
	for len(headers) > 0 {
		var line []byte
		line, headers = cutLine(headers)
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch {
		case asciiEqualFold(trimSpace(name), "upgrade"):
			upgrade = upgrade || hasToken(value, "websocket")
		case asciiEqualFold(trimSpace(name), "connection"):
			connection = connection || hasToken(value, "upgrade")
		}
	}
	return upgrade && connection, false
}

// cutLine splits b after its first CRLF (or bare LF); the line is returned
// without its terminator.
func cutLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	line, rest = b[:i], b[i+1:]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, rest
}

// hasToken reports whether the comma-separated list holds token, compared
// case-insensitively after trimming spaces and tabs.
func hasToken(list []byte, token string) bool {
	for len(list) > 0 {
		var item []byte
		item, list, _ = bytes.Cut(list, []byte(","))
		if asciiEqualFold(trimSpace(item), token) {
			return true
		}
	}
	return false
}

// trimSpace drops leading and trailing spaces and tabs (HTTP's OWS).
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// asciiEqualFold compares b with the lower-case ASCII word s, ignoring the
// case of b; unlike strings.EqualFold it needs no conversion of b.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
