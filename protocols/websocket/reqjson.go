package websocket

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// decodeRequest reads a client message into req. The messages clients
// send are small objects of the four keys of request, spelled as the
// protocol spells them; quickRequest reads those directly and anything
// else (an unknown or differently spelled key, a key twice, escapes in
// op or topic, a value of the wrong type) goes to encoding/json, so what
// a message means and the errors it gets are encoding/json's. json.Valid
// checks the whole message first either way. BenchmarkDataPub, alternated
// three times: a publish took 1,569-1,854 ns and 10 allocations with
// json.Unmarshal alone (reflection over the struct, keys matched
// ignoring case, the strings and the RawMessage copied), 800-862 ns and
// 4 allocations with this. req.Data then points into msg: it is read
// before the call returns (the bus copies what it keeps).
func decodeRequest(msg []byte, req *request) error {
	if json.Valid(msg) && quickRequest(msg, req) {
		return nil
	}
	*req = request{}
	return json.Unmarshal(msg, req)
}

// quickRequest reads msg, valid JSON, into req when it is an object whose
// keys are among "op", "topic", "data" and "retained", each at most once,
// with op and topic strings without escapes, and retained true, false or
// null; it reports false for anything else, req then half filled.
func quickRequest(msg []byte, req *request) bool {
	p := skipSpace(msg, 0)
	if p >= len(msg) || msg[p] != '{' {
		return false
	}
	var seen [4]bool
	p = skipSpace(msg, p+1)
	if p < len(msg) && msg[p] == '}' {
		return true
	}
	for p < len(msg) {
		key, next, ok := plainString(msg, p)
		if !ok {
			return false
		}
		field := -1
		switch string(key) { // no allocation: the compiler compares in place
		case "op":
			field = 0
		case "topic":
			field = 1
		case "data":
			field = 2
		case "retained":
			field = 3
		}
		if field < 0 || seen[field] {
			return false
		}
		seen[field] = true
		p = skipSpace(msg, next)
		p = skipSpace(msg, p+1) // the colon: the JSON is valid
		switch field {
		case 0, 1:
			s, next, ok := plainString(msg, p)
			if !ok {
				return false
			}
			if field == 0 {
				req.Op = opName(s)
			} else {
				req.Topic = string(s)
			}
			p = next
		case 2:
			end := skipValue(msg, p)
			req.Data = msg[p:end] // null too: a RawMessage holds it as it is
			p = end
		case 3: // its own bool, as encoding/json makes: only subs carry it
			switch {
			case bytes.HasPrefix(msg[p:], []byte("true")):
				req.Retained, p = new(true), p+4
			case bytes.HasPrefix(msg[p:], []byte("false")):
				req.Retained, p = new(false), p+5
			case bytes.HasPrefix(msg[p:], []byte("null")):
				req.Retained, p = nil, p+4
			default:
				return false
			}
		}
		p = skipSpace(msg, p)
		if p < len(msg) && msg[p] == '}' {
			return true
		}
		p = skipSpace(msg, p+1) // the comma
	}
	return false
}

// opName returns op as a string, without allocating for the protocol's
// own ops.
func opName(op []byte) string {
	for _, known := range [...]string{"pub", "sub", "unsub", "ping"} {
		if string(op) == known {
			return known
		}
	}
	return string(op)
}

// plainString returns the contents of the JSON string at msg[p] and the
// index after it, if it is one without escapes, control bytes or invalid
// UTF-8 (encoding/json would change those), so its bytes are its text.
func plainString(msg []byte, p int) (s []byte, next int, ok bool) {
	if p >= len(msg) || msg[p] != '"' {
		return nil, 0, false
	}
	for i := p + 1; i < len(msg); i++ {
		switch c := msg[i]; {
		case c == '"':
			s = msg[p+1 : i]
			return s, i + 1, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipValue returns the index after the JSON value at msg[p]; msg is
// valid JSON, so only strings and brackets need watching.
func skipValue(msg []byte, p int) int {
	depth := 0
	for i := p; i < len(msg); i++ {
		switch msg[i] {
		case '"':
			i = stringEnd(msg, i)
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return i // the end of a number or literal
			}
		}
	}
	return len(msg)
}

// stringEnd returns the index of the quote that closes the string that
// opens at msg[p].
func stringEnd(msg []byte, p int) int {
	for i := p + 1; i < len(msg); i++ {
		switch msg[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(msg)
}

func skipSpace(msg []byte, p int) int {
	for p < len(msg) {
		switch msg[p] {
		case ' ', '\t', '\r', '\n':
			p++
		default:
			return p
		}
	}
	return p
}
