package north

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// The tests run against the real mosquitto (Debian's; CI installs it),
// started by northtest.StartMosquitto on a free port with a config of the
// test's own and stopped in t.Cleanup. A missing binary fails the test,
// it does not skip.

// freePort is a port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// received is what a test subscriber got, in order.
type received struct {
	mu   sync.Mutex
	msgs []mqtt.Message
}

func (r *received) add(m mqtt.Message) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

func (r *received) snapshot() []mqtt.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mqtt.Message(nil), r.msgs...)
}

func (r *received) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// subscribe connects a paho client to url and subscribes to filter at
// QoS 1; clean false keeps its session across broker restarts... only
// while the broker keeps it (persistence is off in these tests).
func subscribe(t *testing.T, url, id, filter string, clean bool, opts func(*mqtt.ClientOptions)) (*received, mqtt.Client) {
	t.Helper()
	return subscribeInto(t, &received{}, url, id, filter, clean, opts)
}

// subscribeInto is subscribe adding to r (a second connection after a
// broker restart, say).
func subscribeInto(t *testing.T, r *received, url, id, filter string, clean bool, opts func(*mqtt.ClientOptions)) (*received, mqtt.Client) {
	t.Helper()
	o := mqtt.NewClientOptions().AddBroker(url).SetClientID(id).SetCleanSession(clean).SetOrderMatters(true).
		SetAutoReconnect(false)
	if opts != nil {
		opts(o)
	}
	c := mqtt.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("test subscriber connect: %v", tok.Error())
	}
	tok := c.Subscribe(filter, 1, func(_ mqtt.Client, m mqtt.Message) { r.add(m) })
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("test subscriber subscribe: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return r, c
}

// gate is a TCP relay in front of the broker that the test controls: it
// can cut every connection through it (the gateway's connection dies as
// if the gateway had: the broker sends its will) and hold new ones off
// (a connection is closed on accept) so a test can order who connects
// first after a broker restart.
type gate struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	held   bool
	conns  []net.Conn
	acks   *ackValve // nil: the broker's answers pass as they come
}

func newGate(t *testing.T, target int) *gate {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{l: l, target: "127.0.0.1:" + strconv.Itoa(target)}
	go g.serve()
	t.Cleanup(func() { l.Close(); g.cut() })
	return g
}

func (g *gate) url() string { return "tcp://" + g.l.Addr().String() }

// valve puts v in the broker -> client direction of connections to come.
func (g *gate) valve(v *ackValve) {
	g.mu.Lock()
	g.acks = v
	g.mu.Unlock()
}

// nats is the gate's URL for a NATS client.
func (g *gate) nats() string { return "nats://" + g.l.Addr().String() }

func (g *gate) serve() {
	for {
		c, err := g.l.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		held := g.held
		g.mu.Unlock()
		up, err := net.Dial("tcp", g.target)
		if held || err != nil {
			c.Close()
			if up != nil {
				up.Close()
			}
			continue
		}
		g.mu.Lock()
		g.conns = append(g.conns, c, up)
		g.mu.Unlock()
		g.mu.Lock()
		acks := g.acks
		g.mu.Unlock()
		if acks != nil {
			go acks.relay(c, up)
		} else {
			go relay(c, up)
		}
		go relay(up, c)
	}
}

func relay(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

// cut closes every connection through the gate.
func (g *gate) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		c.Close()
	}
	g.conns = nil
}

// hold sets whether new connections are turned away.
func (g *gate) hold(on bool) {
	g.mu.Lock()
	g.held = on
	g.mu.Unlock()
}

func itoa(i int) string { return strconv.Itoa(i) }
