package websocket

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// request is one client message of the JSON protocol.
type request struct {
	Op       string          `json:"op"`    // sub | unsub | pub | ping
	Topic    string          `json:"topic"` // topic (pub) or filter (sub, unsub)
	Data     json.RawMessage `json:"data"`  // pub: any JSON value (busValue says how it is stored)
	Retained *bool           `json:"retained"`
}

// Error codes of {"op":"error"} replies; none of them closes the
// connection.
const (
	CodeBadJSON     = "bad-json"      // not a JSON object, or no op
	CodeUnknownOp   = "unknown-op"    // op is not sub, unsub, pub or ping
	CodeBadTopic    = "bad-topic"     // pub to an invalid topic
	CodeBadFilter   = "bad-filter"    // sub or unsub with an invalid filter
	CodeTooManySubs = "too-many-subs" // past websocket.max_subs
	CodeTooLarge    = "too-large"     // pub data over bus.max_payload
	CodeNoData      = "no-data"       // pub without data
	CodeBinary      = "binary"        // a binary message: JSON goes in text messages
	CodeUnavailable = "unavailable"   // the bus refused (its subscriber limit)
	CodeForbidden   = "forbidden"     // a "$" topic: the gateway's own (pub), operators only (sub)
	CodeCacheFull   = "cache-full"    // pub to a new topic while the last-value cache is full (bus.max_topics)
	CodeTopicQuota  = "topic-quota"   // pub to a new topic past this connection's bus.topic_quota
	CodeNotWritable = "not-writable"  // pub to a device's polled value that is not writable
	CodeBadValue    = "bad-value"     // pub to a writable device value of a value it cannot carry
)

// pongReply answers {"op":"ping"}; a variable, so replying allocates nothing.
var pongReply = []byte(`{"op":"pong"}`)

// request handles one JSON message.
func (s *session) request(msg []byte) error {
	var req request
	if err := decodeRequest(msg, &req); err != nil {
		return s.replyError(CodeBadJSON, err.Error())
	}
	switch req.Op {
	case "pub":
		return s.publish(req)
	case "sub":
		return s.subscribe(req.Topic, req.Retained == nil || *req.Retained)
	case "unsub":
		return s.unsubscribe(req.Topic)
	case "ping":
		return s.reply(pongReply)
	case "":
		return s.replyError(CodeBadJSON, `a message needs an "op"`)
	}
	return s.replyError(CodeUnknownOp, "unknown op "+strconv.Quote(req.Op))
}

func (s *session) publish(req request) error {
	if req.Data == nil {
		return s.replyError(CodeNoData, `pub needs "data"`)
	}
	if protocols.GatewayTopic(req.Topic) {
		return s.replyError(CodeForbidden, "topics starting with $ are the gateway's own")
	}
	err := s.h.bus.PublishWithin(&s.quota, req.Topic, busValue(req.Data), Source)
	switch {
	case err == nil:
		s.h.n.published.Add(s.stripe, 1)
		return nil
	case errors.Is(err, bus.ErrInvalidTopic):
		return s.replyError(CodeBadTopic, err.Error())
	case errors.Is(err, bus.ErrPayloadTooLarge):
		return s.replyError(CodeTooLarge, err.Error())
	case errors.Is(err, bus.ErrCacheFull):
		return s.replyError(CodeCacheFull, err.Error())
	case errors.Is(err, bus.ErrTopicQuota):
		return s.replyError(CodeTopicQuota, err.Error())
	case errors.Is(err, bus.ErrNotWritable):
		return s.replyError(CodeNotWritable, err.Error())
	case errors.Is(err, bus.ErrWriteValue):
		return s.replyError(CodeBadValue, err.Error())
	}
	return s.replyError(CodeUnavailable, err.Error())
}

// busValue is what a pub puts on the bus. The bus carries bytes, and
// devices on other protocols read them as text: so a JSON string goes on
// as its text, unquoted ("running" -> running), and any other JSON value
// as its JSON text (21.5, {"v":1}, true). A delivery turns the bytes back
// into JSON (appendDelivery), so values round-trip between WebSocket
// clients, except a string whose text is itself JSON ("21.5" comes back
// as the number 21.5).
func busValue(data json.RawMessage) []byte {
	if len(data) < 2 || data[0] != '"' {
		return data
	}
	if bytes.IndexByte(data, '\\') < 0 {
		return data[1 : len(data)-1] // no escapes: the text is what is between the quotes
	}
	var text string
	if json.Unmarshal(data, &text) != nil {
		return data // cannot happen: the request decoded
	}
	return []byte(text)
}

// subscribe adds a filter; the bus replays the retained values it matches
// as the session drains, unless retained is false. A filter already held
// only takes the new retained flag: nothing is replayed again.
func (s *session) subscribe(filter string, retained bool) error {
	if protocols.GatewayTopic(filter) && !s.isOperator() {
		return s.replyError(CodeForbidden, "the gateway's own $ topics are for operators only (admin.operator)")
	}
	i := slices.IndexFunc(s.subs, func(x subscription) bool { return x.filter == filter })
	if i < 0 && len(s.subs) >= s.cfg().MaxSubs {
		return s.replyError(CodeTooManySubs, fmt.Sprintf("at most %d subscriptions", s.cfg().MaxSubs))
	}
	if s.sub == nil {
		sub, err := s.h.bus.NewSubscriber(s.conn.Notify)
		if err != nil {
			return s.replyError(CodeUnavailable, err.Error())
		}
		sub.Recycle() // deliver copies each batch into frames, then Releases it
		s.sub = sub
	}
	if i < 0 {
		s.subs = append(s.subs, subscription{filter: filter, retained: retained})
	} else {
		s.subs[i].retained = retained
	}
	subscribe := s.sub.Subscribe
	if !retained {
		subscribe = s.sub.SubscribeLive
	}
	err := subscribe(filter)
	if err == nil {
		return nil
	}
	if i < 0 {
		s.subs = s.subs[:len(s.subs)-1]
	}
	s.dropIdleSubscriber()
	switch {
	case errors.Is(err, bus.ErrInvalidFilter):
		return s.replyError(CodeBadFilter, err.Error())
	case errors.Is(err, bus.ErrTooManyFilters):
		return s.replyError(CodeTooManySubs, err.Error())
	case errors.Is(err, bus.ErrClosed): // cut off: the bus's disconnect policy
		return s.slowSubscriber()
	}
	return s.replyError(CodeUnavailable, err.Error())
}

func (s *session) unsubscribe(filter string) error {
	if err := bus.ValidFilter(filter); err != nil {
		return s.replyError(CodeBadFilter, err.Error())
	}
	i := slices.IndexFunc(s.subs, func(x subscription) bool { return x.filter == filter })
	if i < 0 {
		return nil // as in MQTT: not subscribed is not an error
	}
	s.subs = slices.Delete(s.subs, i, i+1)
	if err := s.sub.Unsubscribe(filter); errors.Is(err, bus.ErrClosed) {
		return s.slowSubscriber()
	}
	s.dropIdleSubscriber()
	return nil
}

// dropIdleSubscriber closes the bus subscriber once no filter is left, so
// an idle session does not keep its queue.
func (s *session) dropIdleSubscriber() {
	if len(s.subs) == 0 && s.sub != nil {
		s.sub.Close()
		s.sub, s.subs = nil, nil
	}
}

// slowSubscriber closes a connection the bus cut off (bus.drop:
// disconnect): it did not take its deliveries fast enough.
func (s *session) slowSubscriber() error {
	s.h.n.slowClosed.Add(1)
	return s.closeWith(ClosePolicy, "slow consumer", fmt.Errorf("%w: cut off by the bus", ErrSlowConsumer))
}

// wanted filters out retained values that only filters subscribed with
// "retained": false match.
func (s *session) wanted(m *bus.Message) bool {
	if !m.Retained {
		return true
	}
	for _, x := range s.subs {
		if x.retained && bus.Match(x.filter, m.Topic) {
			return true
		}
	}
	return false
}

// reply stages a protocol reply.
func (s *session) reply(p []byte) error { return s.writeText(p, false) }

// replyError answers {"op":"error","code":...,"msg":...}; the connection
// stays open.
func (s *session) replyError(code, msg string) error {
	s.h.n.errors.Add(1)
	bp := s.h.buf.Get(64 + len(msg))
	b := append((*bp)[:0], `{"op":"error","code":`...)
	b = appendJSONString(b, code)
	b = append(b, `,"msg":`...)
	b = appendJSONString(b, msg)
	b = append(b, '}')
	err := s.reply(b)
	*bp = b
	s.h.buf.Put(bp)
	return err
}

// appendDelivery encodes a bus message for the client: data is the
// payload itself when it is valid JSON, else a JSON string of it; ts is
// in unix milliseconds; retained appears (true) only for cached values
// replayed by a sub.
func appendDelivery(b []byte, m *bus.Message) []byte {
	b = append(b, `{"topic":`...)
	b = appendJSONString(b, m.Topic)
	b = append(b, `,"data":`...)
	if json.Valid(m.Payload) {
		b = append(b, m.Payload...)
	} else {
		b = appendJSONString(b, m.Payload)
	}
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, m.TS/1e6, 10)
	b = append(b, `,"src":`...)
	b = appendJSONString(b, m.Src)
	if m.Retained {
		b = append(b, `,"retained":true`...)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as encoding/json
// does (without its HTML escaping): invalid UTF-8 becomes U+FFFD, and
// U+2028 and U+2029 are escaped for JavaScript's sake.
func appendJSONString[T ~string | ~[]byte](b []byte, s T) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendEscape(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendEscape escapes one ASCII byte that JSON does not allow bare.
func appendEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
