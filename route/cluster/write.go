package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgemux/edgemux/route/bus"
)

// Writes to another gateway's device. A topic gateway B polls is claimed
// on every other gateway for B (handleClaims): a publish to it on A is
// not a value but a write request, sent to B on
// "<prefix>.write.<B>"; B publishes it on its own bus as coming from
// "cluster:A", which makes it a write to the device by B's poller, and
// answers with the device's outcome. A never caches the value: the
// device's new value comes back as B's next poll. The writer on A hears
// the outcome through done (a Modbus master's write response, a private
// PUB's ACK); whatever B refuses or the device does not take is an error
// wrapping bus.ErrWriteFailed, with B's words.

// Bounds of the forwarded writes.
const (
	maxForwards  = 256              // writes waiting for their owner's answer, per gateway
	writeTimeout = 30 * time.Second // an owner's answer, at most (a device line may queue writes)
)

// Headers of a write request and its answer.
const (
	hdrTopic   = "Edgemux-Topic"
	hdrOutcome = "Edgemux-Outcome" // "ok", or "refused" / "failed" with the error as the body
)

// remoteWriter forwards writes to the gateway whose poller owns the topic.
type remoteWriter struct {
	l      *Link
	origin string
}

func (w remoteWriter) Write(topic string, payload []byte, src string, done func(error)) error {
	l := w.l
	if !l.nc.IsConnected() {
		return fmt.Errorf("%w: %s is polled by gateway %s and the cluster link is down", bus.ErrWriteBusy, topic, w.origin)
	}
	if l.forwarding.Add(1) > maxForwards {
		l.forwarding.Add(-1)
		return fmt.Errorf("%w: %d writes waiting for other gateways", bus.ErrWriteBusy, maxForwards)
	}
	req := &nats.Msg{
		Subject: l.opt.Prefix + ".write." + w.origin,
		Data:    append([]byte(nil), payload...),
		Header:  nats.Header{hdrTopic: {topic}, hdrOrigin: {l.opt.GatewayID}, hdrSrc: {src}},
	}
	l.forwarded.Add(1)
	go func() {
		defer l.forwarding.Add(-1)
		err := w.outcome(l.nc.RequestMsg(req, writeTimeout))
		if err != nil {
			l.forwardFailed.Add(1)
		}
		if done != nil {
			done(err)
		}
	}()
	return nil
}

// outcome reads the owner's answer.
func (w remoteWriter) outcome(resp *nats.Msg, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("%w: gateway %s did not answer: %w", bus.ErrWriteFailed, w.origin, err)
	case resp.Header.Get(hdrOutcome) == "ok":
		return nil
	default:
		return fmt.Errorf("%w: at gateway %s: %s", bus.ErrWriteFailed, w.origin, resp.Data)
	}
}

// serveWrites answers the write requests other gateways send this one.
func (l *Link) serveWrites() error {
	sub, err := l.nc.Subscribe(l.opt.Prefix+".write."+l.opt.GatewayID, l.onWrite)
	if err != nil {
		return fmt.Errorf("cluster: write requests: %w", err)
	}
	l.writeSub = sub
	return nil
}

// onWrite makes a write request a publish by "cluster:<requester>" on a
// topic this gateway's poller claims: a write to the device.
func (l *Link) onWrite(m *nats.Msg) {
	topic, origin := m.Header.Get(hdrTopic), m.Header.Get(hdrOrigin)
	answer := func(err error) {
		r := &nats.Msg{Header: nats.Header{hdrOutcome: {"ok"}}}
		if err != nil {
			r.Header.Set(hdrOutcome, "failed")
			r.Data = []byte(err.Error())
		}
		_ = m.RespondMsg(r)
	}
	if !l.claims[topic] || origin == "" {
		answer(fmt.Errorf("%w: %q is not polled by gateway %s", bus.ErrNotWritable, topic, l.opt.GatewayID))
		return
	}
	l.served.Add(1)
	err := l.bus.PublishDone(nil, topic, m.Data, SrcPrefix+origin, answer)
	if err != nil {
		if !errors.Is(err, bus.ErrWriteFailed) {
			err = fmt.Errorf("refused: %w", err)
		}
		answer(err)
	}
}
