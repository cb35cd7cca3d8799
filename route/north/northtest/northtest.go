// Package northtest starts a real mosquitto for tests outside route/north
// (the gateway's, the command's) and subscribes to it. The binary is
// Debian's /usr/sbin/mosquitto; CI installs it, and a test without it
// fails rather than skips.
package northtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgemux/edgemux/route/routetest"
)

// Mosquitto is a broker a test started.
type Mosquitto struct {
	t    testing.TB
	Port int
	conf string
	cmd  *exec.Cmd
}

// StartMosquitto runs mosquitto on a free loopback port (persistence off)
// and stops it in t.Cleanup; extra is more of its configuration, lines
// that apply to the listener (TLS options, say). Its output goes to the
// config's path + ".log".
func StartMosquitto(t testing.TB, extra ...string) *Mosquitto {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/mosquitto"); err != nil {
		t.Fatalf("mosquitto is needed (apt-get install mosquitto): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &Mosquitto{t: t, Port: l.Addr().(*net.TCPAddr).Port}
	l.Close()
	m.conf = filepath.Join(t.TempDir(), "mosquitto.conf")
	// user root: started as root, mosquitto would switch to its own user,
	// who cannot read a test's 0600 files (certificates).
	conf := fmt.Sprintf("user root\nlistener %d 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 100000\n", m.Port)
	for _, e := range extra {
		conf += strings.TrimSuffix(e, "\n") + "\n"
	}
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Stop)
	return m
}

// URL is the broker's tcp:// URL.
func (m *Mosquitto) URL() string { return "tcp://127.0.0.1:" + strconv.Itoa(m.Port) }

// Start starts the broker (again) on its port and waits until it listens.
func (m *Mosquitto) Start() {
	m.t.Helper()
	m.cmd = exec.Command("/usr/sbin/mosquitto", "-c", m.conf)
	log, err := os.OpenFile(m.conf+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		m.t.Fatal(err)
	}
	defer log.Close()
	m.cmd.Stdout, m.cmd.Stderr = log, log
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	routetest.Eventually(m.t, "mosquitto listening (its log: "+m.conf+".log)", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(m.Port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// Stop kills the broker and waits for it.
func (m *Mosquitto) Stop() {
	if m.cmd != nil {
		m.cmd.Process.Kill()
		m.cmd.Wait()
		m.cmd = nil
	}
}

// Client is a paho client that keeps what its subscription receives.
type Client struct {
	mqtt.Client
	mu   sync.Mutex
	msgs []mqtt.Message
}

// Connect connects a client (clean session) and subscribes it to filter
// at QoS 1 ("" subscribes to nothing); it disconnects in t.Cleanup.
func Connect(t testing.TB, url, id, filter string) *Client {
	t.Helper()
	c := &Client{}
	c.Client = mqtt.NewClient(mqtt.NewClientOptions().AddBroker(url).SetClientID(id).SetOrderMatters(true).SetAutoReconnect(false))
	if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt connect %s: %v", url, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	if filter != "" {
		tok := c.Subscribe(filter, 1, func(_ mqtt.Client, m mqtt.Message) {
			c.mu.Lock()
			c.msgs = append(c.msgs, m)
			c.mu.Unlock()
		})
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("mqtt subscribe %s: %v", filter, tok.Error())
		}
	}
	return c
}

// Messages are what the subscription received so far, in order.
func (c *Client) Messages() []mqtt.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]mqtt.Message(nil), c.msgs...)
}

// Send publishes at QoS 1 and waits for the broker's PUBACK.
func (c *Client) Send(t testing.TB, topic, payload string) {
	t.Helper()
	tok := c.Publish(topic, 1, false, payload)
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt publish %s: %v", topic, tok.Error())
	}
}
