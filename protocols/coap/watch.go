package coap

import (
	"errors"
	"fmt"
	"time"

	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/edgemux/edgemux/route/bus"
)

// A watcher is what one UDP peer or one TCP connection holds beyond a
// single exchange: its observations over one bus subscriber (created on
// the first), its quota of new bus topics, and the block-wise body it is
// uploading. Only its owner's goroutine touches it.
type watcher struct {
	sub   *bus.Subscriber
	obs   []observation
	quota bus.Quota
	up    *upload
}

// observation is one registration (RFC 7641): the token that names it, a
// topic or filter, and the last Observe value sent.
type observation struct {
	token  [8]byte
	tkl    uint8
	topic  bool   // filter is a single topic, not a wildcard filter
	filter string // bus topic or filter
	seq    uint32 // Observe value of the last notification (24 bits)
	seen   uint64 // bus sequence of the last value sent, for a topic
}

// upload is a block-wise request body being assembled (RFC 7959 section
// 2.5): the resource, the next block expected and the body so far.
type upload struct {
	name    string
	body    []byte
	next    uint32
	expires time.Time
}

// errObservations: the watcher holds coap.max_observations already.
var errObservations = errors.New("coap: too many observations")

func (o *observation) tokenIs(t []byte) bool { return string(o.token[:o.tkl]) == string(t) }

// matches reports whether a bus message concerns o.
func (o *observation) matches(m *bus.Message) bool {
	if o.topic {
		return o.filter == m.Topic && m.Seq > o.seen
	}
	return bus.Match(o.filter, m.Topic)
}

// observe registers token on filter (a topic when topic is set), in place
// of any registration with the same token.
func (w *watcher) observe(s *server, notify func(), token []byte, filter string, topic bool) (*observation, error) {
	w.cancel(token)
	if len(w.obs) >= s.cfg.MaxObservations {
		return nil, fmt.Errorf("%w: limit %d", errObservations, s.cfg.MaxObservations)
	}
	if w.sub == nil {
		sub, err := s.bus.NewSubscriber(notify)
		if err != nil {
			return nil, err
		}
		sub.SetQueue(s.cfg.Queue)
		sub.Recycle() // each delivery round encodes its notifications, then Releases them
		w.sub = sub
	}
	var err error
	if topic {
		// The registration's answer carries the value; a newer one comes
		// live, an older one is skipped (observation.seen).
		err = w.sub.SubscribeLive(filter)
	} else {
		err = w.sub.Subscribe(filter) // retained values first
	}
	if err != nil {
		w.release()
		return nil, err
	}
	o := observation{tkl: uint8(len(token)), topic: topic, filter: filter}
	copy(o.token[:], token)
	w.obs = append(w.obs, o)
	s.stats.observations.Add(1)
	return &w.obs[len(w.obs)-1], nil
}

// cancel ends the observation named by token, if any (a GET with Observe
// 1, a Reset, a failed notification), and reports whether there was one.
func (w *watcher) cancel(token []byte) bool {
	for i := range w.obs {
		if !w.obs[i].tokenIs(token) {
			continue
		}
		filter := w.obs[i].filter
		w.obs = append(w.obs[:i], w.obs[i+1:]...)
		if !w.holds(filter) && w.sub != nil {
			_ = w.sub.Unsubscribe(filter)
		}
		w.release()
		return true
	}
	return false
}

// holds reports whether another observation still wants filter.
func (w *watcher) holds(filter string) bool {
	for i := range w.obs {
		if w.obs[i].filter == filter {
			return true
		}
	}
	return false
}

// release closes the subscriber when no observation is left, so an idle
// peer holds none.
func (w *watcher) release() {
	if len(w.obs) == 0 {
		w.obs = nil
		if w.sub != nil {
			w.sub.Close()
			w.sub = nil
		}
	}
}

// clear ends every observation and upload: the peer or connection is
// gone, or dead.
func (w *watcher) clear(s *server) {
	w.obs = w.obs[:0]
	w.release()
	s.endUpload(w)
}

// notification builds the notification of m for o into res (RFC 7641
// section 4.2): 2.05 with the next Observe value; a topic's value as a GET
// answers it, a filter's as an envelope naming the topic. A body larger
// than a block goes as its first block, and the client asks for the rest
// with GETs (RFC 7959 section 3.4).
func (s *server) notification(o *observation, m *bus.Message, res *response) {
	o.seq = nextObserve(o.seq)
	if o.topic {
		o.seen = m.Seq
		res.setCode(codes.Content)
		res.addUint(optObserve, o.seq)
		res.addBytes(optETag, etagOf(m))
		res.addUint(optContentFormat, uint32(formatOf(m.Payload)))
		s.firstBlock(res, m.Payload)
		return
	}
	res.setCode(codes.Content)
	res.addUint(optObserve, o.seq)
	res.addUint(optContentFormat, uint32(formatJSON))
	res.body = appendEnvelope(res.body[:0], m)
	s.firstBlock(res, res.body)
}

// firstBlock sets the payload, or its first block with Block2 and Size2.
func (s *server) firstBlock(res *response, payload []byte) {
	size := s.cfg.BlockSize
	if len(payload) <= size {
		res.payload = payload
		return
	}
	res.addBlock(optBlock2, block{num: 0, more: true, szx: szxOf(size)})
	res.addUint(optSize2, uint32(len(payload)))
	res.payload = payload[:size]
}

// upload takes one Block1 block. It returns the whole body once the last
// block is in; until then res holds 2.31 Continue, or the error that ends
// the upload.
func (s *server) upload(x *exchange, res *response, name string, b block, data []byte) ([]byte, bool) {
	w := x.w
	up := w.up
	if up != nil && x.now.After(up.expires) {
		s.endUpload(w)
		up = nil
	}
	if b.more && len(data) != b.size() {
		s.endUpload(w)
		res.fail(codes.BadRequest, "a block other than the last must fill its size")
		return nil, false
	}
	if b.num == 0 {
		s.endUpload(w)
		if s.uploads.Add(1) > int64(s.cfg.Uploads) {
			s.uploads.Add(-1)
			res.fail(codes.ServiceUnavailable, "too many block-wise uploads at once")
			return nil, false
		}
		up = &upload{name: name}
		w.up = up
	} else if up == nil || up.name != name || up.next != b.num || len(up.body) != int(b.num)*b.size() {
		res.fail(codes.RequestEntityIncomplete, "block out of order, or its upload expired")
		return nil, false
	}
	if len(up.body)+len(data) > s.cfg.MaxBody {
		s.endUpload(w)
		res.fail(codes.RequestEntityTooLarge, "body over coap.max_body")
		res.addUint(optSize1, uint32(s.cfg.MaxBody))
		return nil, false
	}
	up.body = append(up.body, data...)
	up.next = b.num + 1
	up.expires = x.now.Add(s.cfg.ExchangeLifetime)
	if b.more {
		res.setCode(codes.Continue)
		res.addBlock(optBlock1, b)
		return nil, false
	}
	return up.body, true
}

// endUpload drops w's upload, if any.
func (s *server) endUpload(w *watcher) {
	if w.up != nil {
		w.up = nil
		s.uploads.Add(-1)
	}
}
