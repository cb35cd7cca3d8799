package coap

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/plgd-dev/go-coap/v3/message"

	"github.com/edgemux/edgemux/route/bus"
)

// The bus stores bytes without a media type, so a value's Content-Format
// is read from the value itself: JSON text is application/json (50),
// other UTF-8 text (no control characters but tab and line ends) is
// text/plain (0), anything else
// application/octet-stream (42). A value published over CoAP with a
// Content-Format keeps only its bytes.

// Content formats this server answers with.
var (
	formatText  = message.TextPlain
	formatLinks = message.AppLinkFormat
	formatOctet = message.AppOctets
	formatJSON  = message.AppJSON
)

// formatOf is the Content-Format a stored value is served with.
func formatOf(v []byte) message.MediaType {
	switch {
	case len(v) > 0 && json.Valid(v):
		return formatJSON
	case printable(v):
		return formatText
	}
	return formatOctet
}

// appendEnvelope encodes a message for an observer of a filter, who needs
// to know which topic it is about: {"topic":..., "data":..., "ts":...},
// data being the value itself when it is JSON, else a JSON string (text)
// or base64 (other bytes), like the WebSocket protocol's deliveries.
func appendEnvelope(dst []byte, m *bus.Message) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendJSONString(dst, m.Topic)
	dst = append(dst, `,"data":`...)
	switch formatOf(m.Payload) {
	case formatJSON:
		dst = append(dst, m.Payload...)
	case formatText:
		dst = appendJSONString(dst, string(m.Payload))
	default:
		b, _ := json.Marshal(m.Payload) // []byte marshals as base64
		dst = append(dst, b...)
	}
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, m.TS/1e6, 10)
	return append(dst, '}')
}

// appendJSONString appends s (valid UTF-8) as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// printable reports whether v is UTF-8 text: no control characters but
// tab, newline and carriage return.
func printable(v []byte) bool {
	for _, c := range v {
		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f {
			return false
		}
	}
	return utf8.Valid(v)
}
