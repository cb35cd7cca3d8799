package cluster

import (
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/edgemux/edgemux/route/bus"
)

// mirror is the way out: a bus subscriber on the spanned filters, drained
// by one goroutine that publishes each local message on its topic's
// subject, in queue order. Its queue is bounded (MaxPending) and follows
// the bus's drop policy, so a slow link costs drops, counted, and never
// blocks a publisher.
type mirror struct {
	l    *Link
	sub  *bus.Subscriber
	wake chan struct{} // the queue has something
	back chan struct{} // the link is back, or a publish failed: re-send what is owed
	quit chan struct{}
	buf  []bus.Message

	mu    sync.Mutex
	owing map[string]struct{} // topics whose latest local value is owed to the cluster

	subMu sync.Mutex // guards sub against Stats while drain replaces it
}

// dropped is what the current subscriber's drop policy cost.
func (m *mirror) dropped() uint64 {
	m.subMu.Lock()
	defer m.subMu.Unlock()
	return m.sub.Dropped()
}

// drainBytes bounds one Drain: the loop goes back to its select between
// batches, so stop and link-back are seen under load.
const drainBytes = 1 << 20

func newMirror(l *Link) (*mirror, error) {
	m := &mirror{
		l: l, wake: make(chan struct{}, 1), back: make(chan struct{}, 1), quit: make(chan struct{}),
		owing: map[string]struct{}{},
	}
	if err := m.subscribe(); err != nil {
		return nil, err
	}
	return m, nil
}

// subscribe makes the bus subscriber. Live only: the retained values are
// in the bucket already, or were loaded from it.
func (m *mirror) subscribe() error {
	sub, err := m.l.bus.NewSubscriber(func() { signal(m.wake) })
	if err != nil {
		return err
	}
	sub.SetQueue(m.l.opt.MaxPending)
	for _, f := range m.l.opt.Topics {
		if err := sub.SubscribeLive(f); err != nil {
			sub.Close()
			return err
		}
	}
	m.subMu.Lock()
	m.sub = sub
	m.subMu.Unlock()
	return nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (m *mirror) stop() {
	close(m.quit)
	m.subMu.Lock()
	m.sub.Close()
	m.subMu.Unlock()
}

// linkBack is called by the NATS client when the link is up again.
func (m *mirror) linkBack() { signal(m.back) }

// unacked records that the publish on subject was not acknowledged: its
// topic's latest value is owed.
func (m *mirror) unacked(subject string) {
	topic, err := Topic(strings.TrimPrefix(subject, m.l.valSub))
	if err != nil || !strings.HasPrefix(subject, m.l.valSub) {
		return
	}
	m.owe(topic)
	signal(m.back)
}

// owe remembers topic as owed, within MaxPending topics.
func (m *mirror) owe(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.owing[topic]; ok {
		return
	}
	if len(m.owing) >= m.l.opt.MaxPending {
		m.l.dropped.Add(1) // its last value will not be re-sent
		return
	}
	m.owing[topic] = struct{}{}
}

func (m *mirror) run() {
	defer m.l.wg.Done()
	for {
		select {
		case <-m.quit:
			return
		case <-m.wake:
			m.drain()
		case <-m.back:
			m.drain()
			m.resend()
		}
	}
}

// drain sends everything queued.
func (m *mirror) drain() {
	for {
		select {
		case <-m.quit:
			return
		default:
		}
		b := m.sub.Drain(m.buf[:0], drainBytes)
		for i := range b.Msgs {
			m.send(&b.Msgs[i], false)
		}
		clear(b.Msgs)
		m.buf = b.Msgs[:0]
		if !b.More {
			break
		}
	}
	if m.sub.Disconnected() && !closed(m.quit) {
		// The bus's drop policy is disconnect: subscribe again; what the
		// cut cost is counted in the old subscriber's drops.
		m.l.dropped.Add(m.sub.Dropped())
		m.sub.Close()
		if err := m.subscribe(); err != nil {
			m.l.log.Error("cluster: mirror cannot subscribe again", "err", err)
		}
	}
}

// resend sends the latest local value of every owed topic. The queue has
// just been drained, so that value is the newest: a remote subscriber may
// see it twice, never an older one after it.
func (m *mirror) resend() {
	if !m.l.nc.IsConnected() {
		return
	}
	m.mu.Lock()
	owed := m.owing
	m.owing = map[string]struct{}{}
	m.mu.Unlock()
	for topic := range owed {
		msg, ok := m.l.bus.Get(topic)
		if ok && !strings.HasPrefix(msg.Src, SrcPrefix) {
			m.send(&msg, true)
		}
	}
}

// send publishes one local message to NATS; a message that came from the
// cluster is never sent again (the package doc: no loops).
func (m *mirror) send(msg *bus.Message, resend bool) {
	l := m.l
	if strings.HasPrefix(msg.Src, SrcPrefix) {
		return
	}
	if len(msg.Payload) > l.opt.MaxPayload {
		l.dropped.Add(1)
		return
	}
	if !l.nc.IsConnected() {
		l.unsent.Add(1)
		m.owe(msg.Topic)
		return
	}
	nm := &nats.Msg{
		Subject: l.valSub + Tokens(msg.Topic),
		Data:    msg.Payload,
		Header: nats.Header{
			hdrOrigin: {l.opt.GatewayID},
			hdrSrc:    {msg.Src},
			hdrTS:     {strconv.FormatInt(msg.TS, 10)},
			hdrEpoch:  {l.epoch},
			hdrSeq:    {strconv.FormatUint(msg.Seq, 10)},
		},
	}
	if _, err := l.js.PublishMsgAsync(nm); err != nil {
		l.unsent.Add(1)
		m.owe(msg.Topic)
		return
	}
	if resend {
		l.resent.Add(1)
	}
	l.sent.Add(1)
}
