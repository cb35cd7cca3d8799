// Package pubsub is the JSON pub/sub protocol that the two peer servers of
// the comparison (gorilla on net/http, nbio) speak, the same one edgemux
// speaks on /ws: clients send {"op":"sub","topic":"t/#"},
// {"op":"unsub","topic":"t/#"} and {"op":"pub","topic":"t/1","data":123};
// the server pushes {"topic":..,"data":..,"ts":..,"src":"websocket"} to every
// subscriber whose filter matches, and answers bad requests with
// {"op":"error","code":..,"msg":..}.
//
// It holds only what both peers share (parsing, MQTT-style filters and a
// topic map), so that the two differ in their I/O model and nothing else.
package pubsub

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Limits with safe defaults; both peers use them as they are.
const (
	MaxTopic   = 256         // bytes per topic or filter
	MaxMessage = 64 << 10    // bytes per client message
	MaxSubs    = 64          // filters per connection
	MaxData    = 60 << 10    // bytes of "data" per publish
	srcWS      = "websocket" // the "src" every push carries, as edgemux's
)

// Sentinel errors; each request error is one of these, wrapped.
var (
	ErrTooLarge    = errors.New("pubsub: message too large")
	ErrBadJSON     = errors.New("pubsub: malformed JSON")
	ErrBadOp       = errors.New("pubsub: unknown op")
	ErrBadTopic    = errors.New("pubsub: invalid topic or filter")
	ErrMissingData = errors.New("pubsub: pub without data")
	ErrTooManySubs = errors.New("pubsub: too many subscriptions")
)

// Op is what a client request asks for.
type Op uint8

// The ops a client may send.
const (
	OpSub Op = iota + 1
	OpUnsub
	OpPub
)

// Request is one parsed client message.
type Request struct {
	Op    Op
	Topic string          // a filter for sub/unsub, a plain topic for pub
	Data  json.RawMessage // pub only: the value as sent (valid JSON)
}

type wireRequest struct {
	Op    string          `json:"op"`
	Topic string          `json:"topic"`
	Data  json.RawMessage `json:"data"`
}

// ParseRequest decodes and validates one client message.
func ParseRequest(b []byte) (Request, error) {
	if len(b) > MaxMessage {
		return Request{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(b))
	}
	var w wireRequest
	if err := json.Unmarshal(b, &w); err != nil {
		return Request{}, fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	switch w.Op {
	case "sub", "unsub":
		if !ValidFilter(w.Topic) {
			return Request{}, fmt.Errorf("%w: %q", ErrBadTopic, w.Topic)
		}
		op := OpSub
		if w.Op == "unsub" {
			op = OpUnsub
		}
		return Request{Op: op, Topic: w.Topic}, nil
	case "pub":
		return parsePub(w)
	default:
		return Request{}, fmt.Errorf("%w: %q", ErrBadOp, w.Op)
	}
}

func parsePub(w wireRequest) (Request, error) {
	if !ValidTopic(w.Topic) {
		return Request{}, fmt.Errorf("%w: %q", ErrBadTopic, w.Topic)
	}
	// A missing "data" and "data":null both arrive as null or empty.
	if len(w.Data) == 0 || bytes.Equal(w.Data, []byte("null")) {
		return Request{}, ErrMissingData
	}
	if len(w.Data) > MaxData {
		return Request{}, fmt.Errorf("%w: data of %d bytes", ErrTooLarge, len(w.Data))
	}
	return Request{Op: OpPub, Topic: w.Topic, Data: w.Data}, nil
}

// ValidTopic reports whether t may be published to: 1..MaxTopic bytes,
// no wildcards, no NUL.
func ValidTopic(t string) bool {
	return t != "" && len(t) <= MaxTopic && !strings.ContainsAny(t, "+#\x00")
}

// ValidFilter reports whether f is an MQTT-style filter: levels split by
// '/', '+' alone in a level matches one level, '#' alone in the last level
// matches any rest (including none).
func ValidFilter(f string) bool {
	if f == "" || len(f) > MaxTopic || strings.IndexByte(f, 0) >= 0 {
		return false
	}
	for rest := f; ; {
		level, tail, more := strings.Cut(rest, "/")
		if strings.ContainsAny(level, "+#") && len(level) != 1 {
			return false
		}
		if level == "#" && more {
			return false
		}
		if !more {
			return true
		}
		rest = tail
	}
}

// Match reports whether topic matches filter; both must be valid. It does
// not allocate.
func Match(filter, topic string) bool {
	for {
		fl, frest, fmore := strings.Cut(filter, "/")
		if fl == "#" {
			return true
		}
		tl, trest, tmore := strings.Cut(topic, "/")
		if fl != "+" && fl != tl {
			return false
		}
		if !fmore || !tmore {
			// "a/#" also matches "a": the rest of the filter is just "#".
			return fmore == tmore || (fmore && frest == "#")
		}
		filter, topic = frest, trest
	}
}

type push struct {
	Topic string          `json:"topic"`
	Data  json.RawMessage `json:"data"`
	TS    int64           `json:"ts"`
	Src   string          `json:"src"`
}

// EncodePush is the message a subscriber receives for a publish; ts is
// milliseconds since the Unix epoch. It is encoded once per publish and
// the same bytes go to every subscriber.
func EncodePush(topic string, data json.RawMessage, ts int64) []byte {
	b, err := json.Marshal(push{Topic: topic, Data: data, TS: ts, Src: srcWS})
	if err != nil { // data was validated by ParseRequest; keep the push well-formed anyway
		b, _ = json.Marshal(push{Topic: topic, Data: json.RawMessage("null"), TS: ts, Src: srcWS})
	}
	return b
}

type wireError struct {
	Op   string `json:"op"`
	Code int    `json:"code"`
	Msg  string `json:"msg"`
}

// Error codes sent back in {"op":"error"}.
const (
	CodeBadRequest = 400
	CodeTooMany    = 429
)

// EncodeError is the reply to a request that failed with err.
func EncodeError(err error) []byte {
	code := CodeBadRequest
	if errors.Is(err, ErrTooManySubs) {
		code = CodeTooMany
	}
	b, _ := json.Marshal(wireError{Op: "error", Code: code, Msg: err.Error()})
	return b
}
