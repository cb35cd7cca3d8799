package north

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// MQTTOptions are an MQTT 3.1.1 uplink's settings.
type MQTTOptions struct {
	URL          string // tcp://host:1883, ssl://host:8883 (mqtt://, mqtts://)
	ClientID     string
	CleanSession bool
	KeepAlive    time.Duration
	Username     string
	Password     string
	TLS          *tls.Config // for ssl:// and mqtts://; nil = the system's roots
	WillTopic    string      // "" = no will and no online message
	WillPayload  string      // the will: what the broker says when the connection dies
	Online       string      // published to WillTopic on every connect
	WillQoS      byte
	WillRetain   bool
	Log          *slog.Logger
}

// Reconnect backoff: quick first, so a broker restart costs little, and
// capped, so a dead broker costs a dial every few seconds.
const (
	firstBackoff   = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
	connectTimeout = 10 * time.Second
	stateTimeout   = 5 * time.Second // the online/offline publish and the subscribe wait this long
	// linkCheck is how often a connected uplink also asks paho whether
	// its connection is still open. Paho reports a loss only once its
	// own workers have stopped; a worker that never stopped would leave
	// the uplink waiting on a dead connection, with no reconnect, for as
	// long as the gateway runs.
	linkCheck = time.Second
)

// errLinkClosed is the loss the uplink finds itself (linkCheck).
var errLinkClosed = errors.New("north: the connection is closed and the client did not report it")

// Commands are handled in the order they arrive (paho's OrderMatters):
// a sequence of writes reaches the bus as it was sent; the handler does
// not block.
//
// mqttUplink is an Uplink over eclipse/paho.mqtt.golang. Paho's own
// reconnect is off: every connection is a fresh client, so nothing paho
// kept in memory from a dead connection is sent twice behind the sink's
// back (the sink's store does the resending, and counts it).
type mqttUplink struct {
	o      MQTTOptions
	log    *slog.Logger
	mu     sync.Mutex
	client mqtt.Client // the connected client; nil while down
	up     atomic.Bool
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	start  sync.Once
	began  atomic.Bool // Start was called: Close waits for the loop
}

// NewMQTT returns an MQTT uplink; Start connects it.
func NewMQTT(o MQTTOptions) Uplink {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &mqttUplink{o: o, log: log, stop: make(chan struct{}), done: make(chan struct{})}
}

func (u *mqttUplink) Origin() string { return u.o.URL + " as " + u.o.ClientID }

func (u *mqttUplink) Up() bool { return u.up.Load() }

func (u *mqttUplink) options(lost chan<- error) *mqtt.ClientOptions {
	o := mqtt.NewClientOptions().AddBroker(u.o.URL).SetClientID(u.o.ClientID).
		SetCleanSession(u.o.CleanSession).SetKeepAlive(u.o.KeepAlive).
		SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(connectTimeout).
		SetOrderMatters(true).SetWriteTimeout(stateTimeout).
		SetCustomOpenConnectionFn(dialMQTT(u.o.TLS)).SetStore(noStore{})
	if u.o.Username != "" {
		o.SetUsername(u.o.Username).SetPassword(u.o.Password)
	}
	if u.o.WillTopic != "" {
		o.SetWill(u.o.WillTopic, u.o.WillPayload, u.o.WillQoS, u.o.WillRetain)
	}
	o.SetConnectionLostHandler(func(_ mqtt.Client, err error) {
		if testIgnoreLostReports.Load() {
			return
		}
		select {
		case lost <- err:
		default:
		}
	})
	return o
}

// Start runs the connection loop in a goroutine of its own.
func (u *mqttUplink) Start(onUp func(), onDown func(error)) {
	u.start.Do(func() {
		u.began.Store(true)
		go u.run(onUp, onDown)
	})
}

func (u *mqttUplink) run(onUp func(), onDown func(error)) {
	defer close(u.done)
	backoff := firstBackoff
	for {
		lost := make(chan error, 1)
		c := mqtt.NewClient(u.options(lost))
		if err := u.connect(c); err != nil {
			u.log.Debug("north: connect failed", "broker", u.o.URL, "err", err, "retry_in", backoff)
			select {
			case <-u.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = firstBackoff
		u.mu.Lock()
		u.client = c
		u.mu.Unlock()
		u.up.Store(true)
		u.log.Info("north: connected", "broker", u.o.URL, "client_id", u.o.ClientID)
		onUp()
		err := u.watch(c, lost)
		if err == nil { // Close
			u.announce(c, u.o.WillPayload) // a clean disconnect sends no will: say it ourselves
			u.down(c)
			c.Disconnect(250)
			return
		}
		u.down(c)
		u.log.Warn("north: connection lost", "broker", u.o.URL, "err", err)
		onDown(err)
	}
}

// watch waits while c is connected, and returns why it no longer is:
// paho's report of the loss, or errLinkClosed when paho's status says the
// connection is not open though no report came (linkCheck); nil at Close.
func (u *mqttUplink) watch(c mqtt.Client, lost <-chan error) error {
	check := time.NewTicker(linkCheck)
	defer check.Stop()
	for {
		select {
		case err := <-lost:
			return err
		case <-check.C:
			if !c.IsConnectionOpen() {
				return errLinkClosed
			}
		case <-u.stop:
			return nil
		}
	}
}

// testIgnoreLostReports keeps paho's connection-lost reports from the
// uplinks while a test sets it: the loss is then theirs to find.
var testIgnoreLostReports atomic.Bool

// connect dials and announces the gateway online.
func (u *mqttUplink) connect(c mqtt.Client) error {
	tok := c.Connect()
	t := time.NewTimer(connectTimeout + time.Second)
	defer t.Stop()
	select {
	case <-tok.Done():
	case <-t.C:
		c.Disconnect(0)
		return errors.New("connect timed out")
	case <-u.stop: // Close does not wait out a connect to a dead broker
		c.Disconnect(0)
		return errStopped
	}
	if err := tok.Error(); err != nil {
		return err
	}
	if err := u.announce(c, u.o.Online); err != nil {
		c.Disconnect(0)
		return fmt.Errorf("online message: %w", err)
	}
	return nil
}

// announce publishes the gateway's state to the will topic.
func (u *mqttUplink) announce(c mqtt.Client, state string) error {
	if u.o.WillTopic == "" {
		return nil
	}
	tok := c.Publish(u.o.WillTopic, u.o.WillQoS, u.o.WillRetain, state)
	if !tok.WaitTimeout(stateTimeout) {
		return errAckTimeout
	}
	return tok.Error()
}

func (u *mqttUplink) down(c mqtt.Client) {
	u.up.Store(false)
	u.mu.Lock()
	if u.client == c {
		u.client = nil
	}
	u.mu.Unlock()
}

func (u *mqttUplink) connected() mqtt.Client {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.client
}

func (u *mqttUplink) Publish(topic string, payload []byte, qos byte, retain bool) Pending {
	c := u.connected()
	if c == nil {
		return settled{ErrLinkDown}
	}
	return c.Publish(topic, qos, retain, payload)
}

func (u *mqttUplink) Subscribe(filters []string, handler func(topic string, payload []byte)) error {
	c := u.connected()
	if c == nil {
		return ErrLinkDown
	}
	subs := make(map[string]byte, len(filters))
	for _, f := range filters {
		subs[f] = 1
	}
	tok := c.SubscribeMultiple(subs, func(_ mqtt.Client, m mqtt.Message) { handler(m.Topic(), m.Payload()) })
	if !tok.WaitTimeout(stateTimeout) {
		return errAckTimeout
	}
	return tok.Error()
}

func (u *mqttUplink) Close() {
	u.once.Do(func() { close(u.stop) })
	if u.began.Load() {
		<-u.done
	}
}

// noStore is paho's message store, kept empty. Every connection is a
// fresh client and the sink's own store resends what was not acked, so
// paho's copy of each in-flight message (a map entry under a lock and two
// fmt.Sprintf keys per message) would only cost.
type noStore struct{}

func (noStore) Open()                             {}
func (noStore) Put(string, packets.ControlPacket) {}
func (noStore) Get(string) packets.ControlPacket  { return nil }
func (noStore) All() []string                     { return nil }
func (noStore) Del(string)                        {}
func (noStore) Close()                            {}
func (noStore) Reset()                            {}
