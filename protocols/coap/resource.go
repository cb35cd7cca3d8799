package coap

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// The resources, the same over UDP and TCP: a request in, an answer out,
// with the observations and block-wise uploads of the peer (UDP) or
// connection (TCP) that asked kept in its watcher.
//
//	GET    /t/{topic...}          the last value (2.05), 4.04 when there is none
//	GET    /t/{topic...} Observe  the value, then every update (RFC 7641)
//	GET    /t/{filter}   Observe  every update of every matching topic, as
//	                              {"topic","data","ts"} (filters use + and #)
//	PUT    /t/{topic...}          publish (2.04); POST the same with 2.01
//	DELETE /t/{topic...}          forget the retained value (2.02), where
//	                              coap.delete allows it, else 4.05
//	GET    /.well-known/core      the topics in link format (RFC 6690)

// Source is the name the handler publishes under (bus.Message.Src).
const Source = "coap"

// server answers requests; one per Handler, shared by its workers and
// connections (it holds no per-peer state).
type server struct {
	cfg     Config
	bus     *bus.Bus
	stats   *counters
	log     *slog.Logger // where a TCP session's panic is logged
	uploads atomic.Int64 // block-wise bodies being assembled, in all
}

// exchange is what a request is served with besides the message: who
// asked, and when.
type exchange struct {
	w      *watcher
	notify func() // wakes the asker's owner when its subscriber has messages
	now    time.Time
}

// Option numbers this server understands; any other critical one (odd
// number) gets 4.02 (RFC 7252 section 5.4.1).
func knownOption(id message.OptionID) bool {
	switch id {
	case message.URIHost, message.ETag, message.Observe, message.URIPort, message.URIPath,
		message.ContentFormat, message.URIQuery, message.Accept, message.Block2, message.Block1,
		message.Size2, message.Size1, message.ProxyURI, message.ProxyScheme, message.NoResponse,
		message.IfMatch, message.IfNoneMatch:
		return true
	}
	return false
}

// serve answers req into res.
func (s *server) serve(x *exchange, req *message.Message, res *response) {
	res.reset()
	s.stats.requests.Add(1)
	for _, o := range req.Options {
		switch {
		case o.ID == message.ProxyURI || o.ID == message.ProxyScheme:
			res.fail(codes.ProxyingNotSupported, "not a proxy")
			return
		case !knownOption(o.ID) && o.ID%2 == 1:
			res.fail(codes.BadOption, "unrecognized critical option")
			return
		}
	}
	kind, name := s.resource(req.Options)
	switch kind {
	case resWellKnown:
		s.wellKnown(req, res)
	case resTopic, resFilter:
		if protocols.GatewayTopic(name) {
			res.fail(codes.Forbidden, "the gateway's own topics are for its operators")
			return
		}
		s.topic(x, req, res, name, kind == resFilter)
	default:
		res.fail(codes.NotFound, "no such resource: topics are under /t/")
	}
}

// Resource kinds.
const (
	resNone = iota
	resWellKnown
	resTopic
	resFilter
)

// resource reads the Uri-Path: /.well-known/core, or /t/ and a topic or
// filter (its levels joined by "/").
func (s *server) resource(opts message.Options) (int, string) {
	var sb strings.Builder
	segment, wildcard := 0, false
	first := ""
	for _, o := range opts {
		if o.ID != message.URIPath {
			continue
		}
		v := string(o.Value)
		switch segment {
		case 0:
			first = v
		case 1:
			if first == ".well-known" && v == "core" {
				sb.WriteString("\x00") // marks the well-known path; no topic has a NUL
			}
			sb.WriteString(v)
		default:
			sb.WriteByte('/')
			sb.WriteString(v)
		}
		if segment > 0 && (v == "+" || v == "#") {
			wildcard = true
		}
		segment++
	}
	name := sb.String()
	switch {
	case first == ".well-known" && name == "\x00core":
		return resWellKnown, ""
	case first != "t" || segment < 2:
		return resNone, ""
	case wildcard:
		return resFilter, name
	}
	return resTopic, name
}

// topic serves one topic or filter.
func (s *server) topic(x *exchange, req *message.Message, res *response, name string, filter bool) {
	switch req.Code {
	case codes.GET:
		s.get(x, req, res, name, filter)
	case codes.PUT, codes.POST:
		if filter {
			res.fail(codes.MethodNotAllowed, "a filter can only be observed")
			return
		}
		s.put(x, req, res, name)
	case codes.DELETE:
		s.delete(req, res, name, filter)
	default:
		res.fail(codes.MethodNotAllowed, "GET, PUT, POST or DELETE")
	}
}

// get reads a topic's value, registering or removing an observation as
// the Observe option asks (RFC 7641 section 3.1, 3.6).
func (s *server) get(x *exchange, req *message.Message, res *response, name string, filter bool) {
	var obs *observation
	if v, err := req.Options.GetUint32(message.Observe); err == nil {
		switch v {
		case 0:
			var oerr error
			obs, oerr = x.w.observe(s, x.notify, req.Token, name, !filter)
			switch {
			case errors.Is(oerr, errObservations) && !filter:
				// Served, not observed (RFC 7641 section 4.1).
			case oerr != nil:
				s.observeFailed(res, oerr)
				return
			}
		case 1:
			x.w.cancel(req.Token)
		}
	}
	if filter {
		if obs == nil {
			res.fail(codes.BadRequest, "a filter can only be observed")
			return
		}
		// Matching values come as notifications, retained ones first.
		res.setCode(codes.Content)
		obs.seq = nextObserve(obs.seq)
		res.addUint(message.Observe, obs.seq)
		res.addUint(message.ContentFormat, uint32(formatJSON))
		return
	}
	m, ok := s.bus.Get(name)
	if !ok {
		if obs != nil {
			x.w.cancel(req.Token) // a 4.04 ends the registration (RFC 7641 section 4.1)
		}
		res.fail(codes.NotFound, "no value")
		return
	}
	ct := formatOf(m.Payload)
	if accept, err := req.Options.GetUint32(message.Accept); err == nil && accept != uint32(ct) {
		if obs != nil {
			x.w.cancel(req.Token)
		}
		res.fail(codes.NotAcceptable, "the value is "+ct.String())
		return
	}
	if obs != nil {
		obs.seen = m.Seq
		obs.seq = nextObserve(obs.seq)
	}
	s.value(req, res, &m, obs)
	if obs != nil && res.code != codes.Content {
		x.w.cancel(req.Token) // a bad Block2, say: an error ends the registration
	}
}

// observeFailed answers a registration that could not be made.
func (s *server) observeFailed(res *response, err error) {
	switch {
	case errors.Is(err, errObservations), errors.Is(err, bus.ErrTooManySubscribers), errors.Is(err, bus.ErrTooManyFilters):
		res.fail(codes.ServiceUnavailable, err.Error())
	case errors.Is(err, bus.ErrInvalidFilter):
		res.fail(codes.BadRequest, err.Error())
	default:
		res.fail(codes.InternalServerError, err.Error())
	}
}

// value answers with m's value: 2.05 with its Content-Format and an ETag
// from its bus sequence, or 2.03 when the client already holds that one;
// block-wise when it is larger than a block or the client asks for one.
func (s *server) value(req *message.Message, res *response, m *bus.Message, obs *observation) {
	var etag [8]byte
	binary.BigEndian.PutUint64(etag[:], m.Seq)
	if tag, err := req.Options.GetBytes(message.ETag); err == nil && string(tag) == string(etag[:]) && obs == nil {
		res.setCode(codes.Valid)
		res.addBytes(message.ETag, etag[:])
		return
	}
	res.setCode(codes.Content)
	if obs != nil {
		res.addUint(message.Observe, obs.seq)
	}
	res.addBytes(message.ETag, etag[:])
	res.addUint(message.ContentFormat, uint32(formatOf(m.Payload)))
	s.body(req, res, m.Payload)
}

// body sets res's payload, or the block of it the request asks for
// (RFC 7959 section 2.4), with Block2 and Size2.
func (s *server) body(req *message.Message, res *response, payload []byte) {
	want, asked := block{szx: szxOf(s.cfg.BlockSize)}, false
	if v, err := req.Options.GetBytes(message.Block2); err == nil {
		b, err := parseBlock(v)
		if err != nil {
			res.fail(codes.BadOption, "bad Block2")
			return
		}
		want.num, want.szx, asked = b.num, min(b.szx, want.szx), true
	}
	size := want.size()
	if !asked && len(payload) <= size {
		res.payload = payload
		return
	}
	off := int64(want.num) * int64(size)
	if off >= int64(len(payload)) && off > 0 {
		res.fail(codes.BadOption, "no such block")
		return
	}
	end := min(off+int64(size), int64(len(payload)))
	want.more = end < int64(len(payload))
	res.addBlock(message.Block2, want)
	res.addUint(message.Size2, uint32(len(payload)))
	res.payload = payload[off:end]
}

// put publishes the request's body: at once, or once its last block has
// arrived (RFC 7959 section 2.5).
func (s *server) put(x *exchange, req *message.Message, res *response, name string) {
	done := codes.Changed
	if req.Code == codes.POST {
		done = codes.Created
	}
	if !s.preconditions(req, name) {
		res.fail(codes.PreconditionFailed, "If-Match or If-None-Match does not hold")
		return
	}
	payload := req.Payload
	v, err := req.Options.GetBytes(message.Block1)
	blockwise := err == nil
	if blockwise {
		b, perr := parseBlock(v)
		if perr != nil {
			res.fail(codes.BadOption, "bad Block1")
			return
		}
		var complete bool
		if payload, complete = s.upload(x, res, name, b, req.Payload); !complete {
			return // res says Continue, or why not
		}
		defer s.endUpload(x.w)
		res.setCode(done)
		res.addBlock(message.Block1, b)
	}
	if err := s.bus.PublishWithin(&x.w.quota, name, payload, Source); err != nil {
		s.publishFailed(res, err)
		return
	}
	s.stats.published.Add(1)
	if !blockwise {
		res.setCode(done)
	}
}

// preconditions checks If-Match and If-None-Match (RFC 7252 section
// 5.10.8): If-None-Match holds when the topic has no value; If-Match when
// it has one and, given an ETag, that is the value's.
func (s *server) preconditions(req *message.Message, name string) bool {
	noneMatch := req.Options.HasOption(message.IfNoneMatch)
	first, last, err := req.Options.Find(message.IfMatch)
	if !noneMatch && err != nil {
		return true
	}
	m, ok := s.bus.Get(name)
	if noneMatch && ok {
		return false
	}
	if err != nil {
		return true
	}
	if !ok {
		return false
	}
	for _, o := range req.Options[first:last] {
		if len(o.Value) == 0 || string(o.Value) == string(etagOf(&m)) {
			return true
		}
	}
	return false
}

// publishFailed answers a publish the bus refused, in CoAP's words.
func (s *server) publishFailed(res *response, err error) {
	switch {
	case errors.Is(err, bus.ErrInvalidTopic):
		res.fail(codes.BadRequest, err.Error())
	case errors.Is(err, bus.ErrPayloadTooLarge):
		res.fail(codes.RequestEntityTooLarge, err.Error())
		res.addUint(message.Size1, uint32(s.bus.Options().MaxPayload))
	case errors.Is(err, bus.ErrTopicQuota):
		res.fail(codes.TooManyRequests, err.Error())
	case errors.Is(err, bus.ErrCacheFull), errors.Is(err, bus.ErrWriteBusy):
		res.fail(codes.ServiceUnavailable, err.Error())
	case errors.Is(err, bus.ErrNotWritable):
		res.fail(codes.Forbidden, err.Error())
	case errors.Is(err, bus.ErrWriteValue):
		res.fail(codes.BadRequest, err.Error())
	default:
		res.fail(codes.InternalServerError, err.Error())
	}
}

// delete forgets a topic's retained value where coap.delete allows it.
func (s *server) delete(req *message.Message, res *response, name string, filter bool) {
	allowed := false
	for _, f := range s.cfg.Delete {
		if !filter && bus.Match(f, name) {
			allowed = true
			break
		}
	}
	switch {
	case !allowed:
		res.fail(codes.MethodNotAllowed, "DELETE is not allowed here (coap.delete)")
	case s.bus.Forget(name):
		res.setCode(codes.Deleted)
	default:
		res.fail(codes.NotFound, "no value")
	}
}

// wellKnown serves /.well-known/core.
func (s *server) wellKnown(req *message.Message, res *response) {
	if req.Code != codes.GET {
		res.fail(codes.MethodNotAllowed, "GET only")
		return
	}
	var qbuf [8]string
	n, err := req.Options.GetStrings(message.URIQuery, qbuf[:])
	if err != nil && !errors.Is(err, message.ErrOptionNotFound) {
		res.fail(codes.BadRequest, "too many queries")
		return
	}
	res.setCode(codes.Content)
	res.addUint(message.ContentFormat, uint32(formatLinks))
	res.body = appendLinks(res.body[:0], s.bus, qbuf[:n], s.cfg.MaxBody)
	s.body(req, res, res.body)
}

// nextObserve is the Observe value after v: 24 bits that wrap (RFC 7641
// section 4.4 compares them modulo 2**23).
func nextObserve(v uint32) uint32 { return (v + 1) & 0xffffff }
