package coap

import (
	"container/heap"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	udpcoder "github.com/plgd-dev/go-coap/v3/udp/coder"

	"github.com/edgemux/edgemux/route/bus"
)

// maxOptions is how many options a request may carry; more is malformed.
const maxOptions = 48

// deliverBatch and deliverRounds bound what one wake delivers to one
// peer before the worker serves the others.
const (
	deliverBatch  = 64 << 10
	deliverRounds = 8
)

// Endpoint is CoAP over UDP on one worker, with no I/O of its own: Input
// takes a datagram, Woken delivers what observers' subscriptions hold,
// Tick runs the timers, and every datagram to send goes to the send
// function given to NewEndpoint. All but the wake function are called
// from one goroutine.
type Endpoint struct {
	srv      *server
	cfg      Config
	send     func(to netip.AddrPort, b []byte)
	wake     func()
	peers    map[netip.AddrPort]*peer
	maxPeers int
	idle     idleList
	cache    dedupCache
	timers   timers
	uploads  []*peer // peers that started a block-wise upload
	rnd      *rand.Rand

	wakeMu       sync.Mutex
	woken, spare []*peer

	in   message.Message
	opts [maxOptions]message.Option
	res  response
	out  []byte
	msgs []bus.Message
}

// newEndpoint makes worker index's endpoint (of workers): its share of
// coap.max_peers, its response cache. wake is called, from any goroutine,
// when Woken should run.
func newEndpoint(srv *server, workers int, send func(netip.AddrPort, []byte), wake func()) *Endpoint {
	e := &Endpoint{
		srv: srv, cfg: srv.cfg, send: send, wake: wake,
		peers:    map[netip.AddrPort]*peer{},
		maxPeers: max(1, (srv.cfg.MaxPeers+workers-1)/workers),
		cache:    newDedupCache(srv.cfg.ResponseCache, srv.cfg.ExchangeLifetime),
		rnd:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		out:      make([]byte, 0, 1500),
	}
	e.idle.init()
	return e
}

// Peers is how many peers the endpoint remembers.
func (e *Endpoint) Peers() int { return len(e.peers) }

// Input handles one datagram from a peer.
func (e *Endpoint) Input(from netip.AddrPort, b []byte, now time.Time) {
	e.in.Options = e.opts[:0]
	if _, err := udpcoder.DefaultCoder.Decode(b, &e.in); err != nil {
		e.malformed(from, b)
		return
	}
	mid := uint16(e.in.MessageID)
	switch e.in.Type {
	case message.Confirmable, message.NonConfirmable:
		switch {
		case e.in.Code == codes.Empty:
			if e.in.Type == message.Confirmable { // a CoAP ping (RFC 7252 section 4.3)
				e.reset(from, mid)
			}
		case e.in.Code >= 1 && e.in.Code < 32:
			e.request(from, mid, now)
		case e.in.Type == message.Confirmable: // a response or other code we never asked for
			e.reset(from, mid)
		}
	case message.Acknowledgement:
		e.acked(from, mid)
	case message.Reset:
		e.wasReset(from, mid)
	}
}

// malformed counts a datagram that does not parse and rejects it with a
// Reset when it is confirmable (RFC 7252 section 4.2); anything else is
// dropped silently, as section 4.3 asks.
func (e *Endpoint) malformed(from netip.AddrPort, b []byte) {
	e.srv.stats.malformed.Add(1)
	if len(b) >= 4 && b[0]>>6 == 1 && (b[0]>>4)&3 == uint8(message.Confirmable) {
		e.reset(from, uint16(b[2])<<8|uint16(b[3]))
	}
}

// reset sends an empty Reset for mid.
func (e *Endpoint) reset(to netip.AddrPort, mid uint16) {
	e.emit(to, message.Message{Code: codes.Empty, Type: message.Reset, MessageID: int32(mid)})
}

// emit encodes m into the output buffer and sends it; it returns the
// bytes sent (valid until the next emit).
func (e *Endpoint) emit(to netip.AddrPort, m message.Message) []byte {
	for {
		n, err := udpcoder.DefaultCoder.Encode(m, e.out[:cap(e.out)])
		if err == nil {
			e.out = e.out[:n]
			e.send(to, e.out)
			return e.out
		}
		if n <= cap(e.out) { // not a size problem: an answer we built wrong
			return nil
		}
		e.out = make([]byte, 0, n)
	}
}

// request serves one request: from the response cache when it is a
// duplicate, else by the resources, answered piggy-backed on the ACK of
// a confirmable request and non-confirmable otherwise.
func (e *Endpoint) request(from netip.AddrPort, mid uint16, now time.Time) {
	key := dedupKey{peer: from, mid: mid}
	if resp, ok := e.cache.get(key, now); ok {
		e.srv.stats.duplicates.Add(1)
		e.send(from, resp)
		return
	}
	p := e.peerFor(from, now)
	if p == nil {
		e.refuse(from, mid)
		return
	}
	p.last = now
	x := exchange{w: &p.w, notify: p.wakeFn, now: now}
	e.srv.serve(&x, &e.in, &e.res)
	e.settle(p)
	m := e.res.message(e.in.Token)
	if e.in.Type == message.Confirmable {
		m.Type, m.MessageID = message.Acknowledgement, int32(mid)
	} else {
		m.Type, m.MessageID = message.NonConfirmable, int32(p.nextMID())
	}
	if sent := e.emit(from, m); sent != nil {
		e.cache.put(key, sent, now)
	}
}

// refuse answers a new peer when every place is held by an observer:
// 5.03, from no state and into none.
func (e *Endpoint) refuse(from netip.AddrPort, mid uint16) {
	e.srv.stats.peersRefused.Add(1)
	e.res.fail(codes.ServiceUnavailable, "too many peers")
	m := e.res.message(e.in.Token)
	if e.in.Type == message.Confirmable {
		m.Type, m.MessageID = message.Acknowledgement, int32(mid)
	} else {
		m.Type, m.MessageID = message.NonConfirmable, int32(e.rnd.Uint32()&0xffff)
	}
	e.emit(from, m)
}

// peerFor finds or makes the peer at addr, forgetting the longest idle
// one when the worker holds its share of coap.max_peers; nil when every
// place is held by an observer.
func (e *Endpoint) peerFor(addr netip.AddrPort, now time.Time) *peer {
	if p := e.peers[addr]; p != nil {
		if p.idle {
			e.idle.pushFront(p)
		}
		return p
	}
	if len(e.peers) >= e.maxPeers {
		victim := e.idle.oldest()
		if victim == nil {
			return nil
		}
		e.forget(victim)
	}
	p := &peer{addr: addr, last: now, lastCON: now, mid: uint16(e.rnd.Uint32())}
	p.wakeFn = func() { e.queue(p) }
	e.peers[addr] = p
	e.idle.pushFront(p)
	return p
}

// settle keeps a peer's place in the idle list and the upload list in
// step with its watcher after a change.
func (e *Endpoint) settle(p *peer) {
	switch {
	case len(p.w.obs) > 0 && p.idle:
		e.idle.remove(p)
	case len(p.w.obs) == 0 && !p.idle && !p.gone:
		e.idle.pushFront(p)
	}
	if p.w.up != nil && !contains(e.uploads, p) {
		e.uploads = append(e.uploads, p)
	}
}

func contains(ps []*peer, p *peer) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// forget drops a peer and everything it holds.
func (e *Endpoint) forget(p *peer) {
	e.srv.stats.peersEvicted.Add(1)
	p.gone = true
	p.con = nil
	p.w.clear(e.srv)
	e.idle.remove(p)
	delete(e.peers, p.addr)
}

// acked takes the ACK of a confirmable notification.
func (e *Endpoint) acked(from netip.AddrPort, mid uint16) {
	if p := e.peers[from]; p != nil && p.con != nil && p.con.mid == mid {
		p.con = nil
		p.conGen++
	}
}

// wasReset takes a Reset: one that names a notification ends its
// observation (RFC 7641 section 3.6).
func (e *Endpoint) wasReset(from netip.AddrPort, mid uint16) {
	e.srv.stats.resets.Add(1)
	p := e.peers[from]
	if p == nil {
		return
	}
	token, ok := p.tokenOf(mid)
	if !ok {
		return
	}
	var t [8]byte
	token = t[:copy(t[:], token)]
	if p.con != nil && p.con.mid == mid {
		p.con = nil
		p.conGen++
	}
	p.w.cancel(token)
	e.settle(p)
}

// queue puts p on the wake list; from any goroutine (the bus's notify).
func (e *Endpoint) queue(p *peer) {
	if p.queued.Swap(true) {
		return
	}
	e.wakeMu.Lock()
	e.woken = append(e.woken, p)
	e.wakeMu.Unlock()
	e.wake()
}

// Woken delivers to every peer whose subscriber has messages.
func (e *Endpoint) Woken(now time.Time) {
	e.wakeMu.Lock()
	list := e.woken
	e.woken, e.spare = e.spare, nil
	e.wakeMu.Unlock()
	for _, p := range list {
		p.queued.Store(false) // a publish from here on queues it again
		if !p.gone {
			e.deliver(p, now)
		}
	}
	clear(list)
	e.wakeMu.Lock()
	e.spare = list[:0]
	e.wakeMu.Unlock()
}

// deliver turns what p's subscriber holds into notifications, a bounded
// amount per call; the rest waits for the next wake.
func (e *Endpoint) deliver(p *peer, now time.Time) {
	for round := 0; p.w.sub != nil; round++ {
		if p.w.sub.Disconnected() { // the bus's Disconnect policy cut it off
			p.w.clear(e.srv)
			e.settle(p)
			return
		}
		if round == deliverRounds {
			e.queue(p)
			return
		}
		sub := p.w.sub // a notification may end the watch
		batch := sub.Drain(e.msgs[:0], deliverBatch)
		e.msgs = batch.Msgs
		if batch.Dropped > 0 {
			e.srv.stats.dropped.Add(batch.Dropped)
		}
		for i := range batch.Msgs {
			m := &batch.Msgs[i]
			for j := range p.w.obs {
				if o := &p.w.obs[j]; o.matches(m) {
					e.notify(p, o, m, now)
				}
			}
		}
		// Each notification was encoded into a datagram (and a pending
		// confirmable one copied): the recycled payloads may go back
		// (bus.Subscriber.Recycle).
		sub.Release(batch.Msgs)
		clear(e.msgs)       // drop references to payloads
		e.res.payload = nil // it pointed into the last one released
		if !batch.More {
			return
		}
	}
}

// notify sends one notification: confirmable when the peer is due one
// (every coap.confirm_every, and at least every coap.confirm_interval,
// RFC 7641 section 4.5) and has none outstanding (NSTART = 1),
// non-confirmable otherwise.
func (e *Endpoint) notify(p *peer, o *observation, m *bus.Message, now time.Time) {
	e.srv.notification(o, m, &e.res)
	due := p.sinceCON+1 >= e.cfg.ConfirmEvery || now.Sub(p.lastCON) >= e.cfg.ConfirmInterval
	msg := e.res.message(o.token[:o.tkl])
	mid := p.nextMID()
	msg.MessageID = int32(mid)
	e.srv.stats.notifications.Add(1)
	if !due || p.con != nil {
		msg.Type = message.NonConfirmable
		e.emit(p.addr, msg)
		p.sinceCON++
		p.remember(mid, o.token[:o.tkl])
		return
	}
	msg.Type = message.Confirmable
	sent := e.emit(p.addr, msg)
	if sent == nil {
		return
	}
	e.srv.stats.confirmable.Add(1)
	c := &pending{mid: mid, tkl: o.tkl, token: o.token, bytes: append([]byte(nil), sent...)}
	// ACK_TIMEOUT times a random factor in [1, 1.5) (RFC 7252 section 4.8).
	c.timeout = e.cfg.AckTimeout + time.Duration(e.rnd.Int64N(int64(e.cfg.AckTimeout/2)+1))
	p.con, p.sinceCON, p.lastCON = c, 0, now
	p.conGen++
	e.timers.add(now.Add(c.timeout), p)
}

// Tick retransmits confirmable notifications whose ACK is late and drops
// the observations of peers that never acknowledged, forgets idle peers,
// expired answers and stale uploads, and returns how long until the next
// retransmission (0: none pending).
func (e *Endpoint) Tick(now time.Time) time.Duration {
	for len(e.timers) > 0 && !now.Before(e.timers[0].at) {
		t := heap.Pop(&e.timers).(timer)
		if p := t.p; !p.gone && p.con != nil && p.conGen == t.gen {
			e.retransmit(p, now)
		}
	}
	e.cache.expire(now)
	for p := e.idle.oldest(); p != nil && now.Sub(p.last) >= e.cfg.PeerIdle; p = e.idle.oldest() {
		e.forget(p)
	}
	e.expireUploads(now)
	if len(e.timers) == 0 {
		return 0
	}
	return max(e.timers[0].at.Sub(now), time.Millisecond)
}

// retransmit sends p's confirmable notification again with its timeout
// doubled, or, after coap.max_retransmit tries, takes the peer for dead
// and ends its observations (RFC 7641 section 4.5).
func (e *Endpoint) retransmit(p *peer, now time.Time) {
	c := p.con
	if c.tries >= e.cfg.MaxRetransmit {
		e.srv.stats.deadObservers.Add(1)
		p.con = nil
		p.conGen++
		p.w.clear(e.srv)
		e.settle(p)
		return
	}
	c.tries++
	c.timeout *= 2
	e.srv.stats.retransmits.Add(1)
	e.send(p.addr, c.bytes)
	e.timers.add(now.Add(c.timeout), p)
}

// expireUploads drops block-wise uploads that stopped coming.
func (e *Endpoint) expireUploads(now time.Time) {
	kept := e.uploads[:0]
	for _, p := range e.uploads {
		switch {
		case p.gone || p.w.up == nil:
		case now.After(p.w.up.expires):
			e.srv.endUpload(&p.w)
		default:
			kept = append(kept, p)
		}
	}
	clear(e.uploads[len(kept):])
	e.uploads = kept
}

// Close forgets every peer: the gateway stops.
func (e *Endpoint) Close() {
	for _, p := range e.peers {
		e.forget(p)
	}
}
