package coap

import (
	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
)

// response is an answer or a notification being built: the code, options
// whose values live in the response's own array, and the payload. One per
// worker or connection, reset for every message, so building one
// allocates nothing.
type response struct {
	code    codes.Code
	opts    message.Options
	optBuf  [12]message.Option
	vals    [96]byte
	nvals   int
	payload []byte
	body    []byte // a rendered body (links, an envelope) that payload may point into
}

func (r *response) reset() {
	r.code, r.opts, r.nvals, r.payload = 0, r.optBuf[:0], 0, nil
}

// setCode resets r to an answer with code and no options or payload.
func (r *response) setCode(c codes.Code) {
	r.reset()
	r.code = c
}

// fail resets r to an error answer: code, and a diagnostic payload
// (RFC 7252 section 5.5.2: text for a person, no Content-Format).
func (r *response) fail(c codes.Code, diagnostic string) {
	r.setCode(c)
	r.payload = append(r.body[:0], diagnostic...)
	r.body = r.payload
}

// addUint adds a uint option.
func (r *response) addUint(id message.OptionID, v uint32) {
	start := r.nvals
	b := appendUint(r.vals[start:start:len(r.vals)], v)
	r.nvals += len(b)
	r.opts = r.opts.Add(message.Option{ID: id, Value: b})
}

// addBytes adds an opaque option, copying v.
func (r *response) addBytes(id message.OptionID, v []byte) {
	start := r.nvals
	b := append(r.vals[start:start:len(r.vals)], v...)
	r.nvals += len(b)
	r.opts = r.opts.Add(message.Option{ID: id, Value: b})
}

// addBlock adds a Block1 or Block2 option.
func (r *response) addBlock(id message.OptionID, b block) {
	start := r.nvals
	v := b.value(r.vals[start:start:len(r.vals)])
	r.nvals += len(v)
	r.opts = r.opts.Add(message.Option{ID: id, Value: v})
}

// message is r as go-coap's codec takes it, with token.
func (r *response) message(token []byte) message.Message {
	return message.Message{Code: r.code, Token: token, Options: r.opts, Payload: r.payload, MessageID: -1, Type: message.Unset}
}
