package north

import (
	"errors"
	"time"
)

// ErrLinkDown is a publish refused because the uplink is not connected.
var ErrLinkDown = errors.New("north: link down")

// Uplink is one engine's connection, as a sink uses it. Start connects and
// keeps reconnecting until Close; onUp runs on every (re)connect, after
// the engine has announced the gateway online and before publishes flow,
// and onDown when the connection is lost. Publish never blocks for long:
// it hands the message to the engine and returns a Pending that settles
// when the broker took it (QoS 1: its PUBACK; QoS 0: written). A Publish
// while the link is down settles at once with ErrLinkDown. Commands are
// delivered to the handler given to Subscribe, on the engine's goroutine;
// the sink subscribes again on each onUp.
type Uplink interface {
	Start(onUp func(), onDown func(error))
	Publish(topic string, payload []byte, qos byte, retain bool) Pending
	Subscribe(filters []string, handler func(topic string, payload []byte)) error
	Up() bool
	Origin() string // who is at the other end, for logs: the broker's URL and our client id
	Close()         // announces the gateway offline and disconnects
}

// Pending is a publish in flight.
type Pending interface {
	Done() <-chan struct{}
	Error() error // valid once Done is closed
}

// settled is a Pending that is already over.
type settled struct{ err error }

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (s settled) Done() <-chan struct{} { return closedCh }
func (s settled) Error() error          { return s.err }

// waitPending waits for p at most timeout; a publish not settled by then
// counts as failed (the link is as good as down).
// A publish still in flight when the link goes down (down closed)
// failed too: the engine will not finish it on a new connection.
func waitPending(p Pending, timeout time.Duration, stop, down <-chan struct{}) error {
	if settledNow(p) {
		return p.Error()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.Done():
		return p.Error()
	case <-t.C:
		return errAckTimeout
	case <-down:
		return ErrLinkDown
	case <-stop:
		return errStopped
	}
}

var (
	errAckTimeout = errors.New("north: no acknowledgement in time")
	errStopped    = errors.New("north: sink stopped")
)
