package north

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"strconv"
	"sync/atomic"
)

// Payload forms a sink sends.
const (
	PayloadRaw      = "raw"
	PayloadEnvelope = "envelope"
)

// polled is the shape of a poller's payload, unwrapped into an envelope.
type polled struct {
	V  json.RawMessage `json:"v"`
	Q  string          `json:"q"`
	TS int64           `json:"ts"`
}

// envelope wraps payload as {"v","src","q","ts"}: v is the payload as
// JSON when it is JSON, else as a JSON string; q is "good" unless the
// payload is a poller's {"v","q","ts"}, whose value, quality and time are
// taken. tsMs is the bus time of the message.
func envelope(payload []byte, src string, tsMs int64) []byte {
	v, q, ts := json.RawMessage(nil), "good", tsMs
	if json.Valid(payload) {
		v = payload
		var p polled
		if bytes.HasPrefix(bytes.TrimSpace(payload), []byte("{")) && isPolled(payload, &p) {
			v, q, ts = p.V, p.Q, p.TS
		}
	} else {
		v, _ = json.Marshal(string(payload)) // invalid UTF-8 becomes U+FFFD
	}
	out := make([]byte, 0, len(v)+len(src)+48)
	out = append(out, `{"v":`...)
	out = append(out, compact(v)...)
	out = append(out, `,"src":`...)
	out = strconv.AppendQuote(out, src)
	out = append(out, `,"q":`...)
	out = strconv.AppendQuote(out, q)
	out = append(out, `,"ts":`...)
	out = strconv.AppendInt(out, ts, 10)
	return append(out, '}')
}

// isPolled reports whether payload is exactly a poller's object: the keys
// v, q and ts and no others.
func isPolled(payload []byte, p *polled) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(payload, &keys) != nil || len(keys) != 3 {
		return false
	}
	return keys["v"] != nil && keys["q"] != nil && keys["ts"] != nil && json.Unmarshal(payload, p) == nil && p.Q != ""
}

// compact drops insignificant white space, so the envelope is one line.
func compact(v []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return v
	}
	return b.Bytes()
}

// changeTable remembers a hash of the last payload sent per remote topic,
// for maps with on: change. It is bounded: a new topic in a full table
// evicts another (counted), which is then sent again on its next message
// even if unchanged. A 64-bit hash may collide: one change in 2^64 could
// go unsent, taken as the price of not keeping payloads.
type changeTable struct {
	seed    maphash.Seed
	max     int
	last    map[string]uint64
	evicted atomic.Uint64 // read by Stats
}

func newChangeTable(max int) *changeTable {
	return &changeTable{seed: maphash.MakeSeed(), max: max, last: map[string]uint64{}}
}

// changed reports whether payload differs from the last sent on topic,
// and records it as the last.
func (c *changeTable) changed(topic string, payload []byte) bool {
	h := maphash.Bytes(c.seed, payload)
	if old, ok := c.last[topic]; ok {
		c.last[topic] = h
		return old != h
	}
	if len(c.last) >= c.max {
		for k := range c.last { // any one: map order is random enough
			delete(c.last, k)
			c.evicted.Add(1)
			break
		}
	}
	c.last[topic] = h
	return true
}
