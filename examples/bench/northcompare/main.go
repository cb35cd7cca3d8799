// Command northcompare measures edgemux's northbound sinks against the
// same broker driven directly, on one machine in one run: messages/s from
// the bus to MQTT (mosquitto) and to NATS (nats-server), spread over
// 10,000 topics, beside a plain client publishing the same messages the
// same way (the ceiling: what the broker takes from one connection), and
// the drain rate of a store-and-forward backlog after an outage.
//
//	go run ./examples/bench/northcompare -n 100000
//
// Each figure is the time from the first publish until a subscriber on the
// broker has received every message. It starts mosquitto and nats-server
// itself (Debian's binaries) on free ports with temp dirs.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/north"
)

func main() {
	n := flag.Int("n", 100000, "messages per run")
	topics := flag.Int("topics", 10000, "topics the messages are spread over")
	size := flag.Int("size", 64, "payload bytes")
	flag.Parse()
	dir, err := os.MkdirTemp("", "northcompare-")
	check(err)
	defer os.RemoveAll(dir)
	mq := startServer(dir, "mosquitto")
	defer mq.Process.Kill()
	ns := startServer(dir, "nats")
	defer ns.Process.Kill()
	payload := make([]byte, *size)
	for i := range payload {
		payload[i] = 'x'
	}
	b := benchmark{n: *n, topics: *topics, payload: payload, dir: dir}
	fmt.Printf("messages=%d topics=%d size=%d\n", b.n, b.topics, len(payload))
	b.report("mqtt ceiling (paho, QoS 1, window 64)", b.mqttDirect(mq.url))
	b.report("edgemux bus -> mqtt (QoS 1)", b.sink(mq.url, "mqtt", false))
	b.report("edgemux bus -> mqtt (QoS 1, store)", b.sink(mq.url, "mqtt", true))
	b.report("nats ceiling (core, flushed)", b.natsDirect(ns.url))
	b.report("edgemux bus -> nats (core, QoS 1)", b.sink(ns.url, "nats", false))
	b.report("edgemux mqtt drain after an outage", b.drain(mq.url))
}

type server struct {
	*exec.Cmd
	url string
}

// startServer runs mosquitto or nats-server on a free port.
func startServer(dir, kind string) server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	var s server
	if kind == "mosquitto" {
		conf := filepath.Join(dir, "mosquitto.conf")
		check(os.WriteFile(conf, []byte("user root\nlistener "+port+" 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\nmax_inflight_messages 0\n"), 0o600))
		s = server{exec.Command("/usr/sbin/mosquitto", "-c", conf), "tcp://127.0.0.1:" + port}
	} else {
		s = server{exec.Command("/usr/sbin/nats-server", "-a", "127.0.0.1", "-p", port), "nats://127.0.0.1:" + port}
	}
	check(s.Start())
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			panic(kind + " did not start")
		}
	}
}

type benchmark struct {
	n, topics int
	payload   []byte
	dir       string
	runs      int
}

func (b *benchmark) report(what string, d time.Duration) {
	fmt.Printf("%-40s %8.0f msgs/s  (%v)\n", what, float64(b.n)/d.Seconds(), d.Round(time.Millisecond))
}

func (b *benchmark) topic(i int) string { return "bench/t" + strconv.Itoa(i%b.topics) }

// counter is a subscriber on the broker counting what arrives.
type counter struct{ got atomic.Int64 }

func (c *counter) wait(n int) {
	for deadline := time.Now().Add(10 * time.Minute); c.got.Load() < int64(n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("only %d of %d messages arrived", c.got.Load(), n))
		}
	}
}

func (b *benchmark) mqttSubscriber(url, filter string) (*counter, mqtt.Client) {
	c := &counter{}
	b.runs++
	cl := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(url).SetClientID("bench-sub-" + strconv.Itoa(b.runs)))
	tok := cl.Connect()
	tok.Wait()
	check(tok.Error())
	tok = cl.Subscribe(filter, 1, func(mqtt.Client, mqtt.Message) { c.got.Add(1) })
	tok.Wait()
	check(tok.Error())
	return c, cl
}

// mqttDirect: one paho client publishing at QoS 1 with 64 in flight.
func (b *benchmark) mqttDirect(url string) time.Duration {
	sub, sc := b.mqttSubscriber(url, "bench/#")
	defer sc.Disconnect(0)
	cl := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(url).SetClientID("bench-pub"))
	tok := cl.Connect()
	tok.Wait()
	check(tok.Error())
	defer cl.Disconnect(0)
	window := make([]mqtt.Token, 0, 64)
	start := time.Now()
	for i := range b.n {
		if len(window) == cap(window) {
			window[0].Wait()
			window = window[1:]
		}
		window = append(window, cl.Publish(b.topic(i), 1, false, b.payload))
	}
	sub.wait(b.n)
	return time.Since(start)
}

// natsDirect: one nats.go connection publishing, flushed at the end.
func (b *benchmark) natsDirect(url string) time.Duration {
	nc, err := nats.Connect(url)
	check(err)
	defer nc.Close()
	c := &counter{}
	_, err = nc.Subscribe("bench.>", func(*nats.Msg) { c.got.Add(1) })
	check(err)
	check(nc.Flush())
	pub, err := nats.Connect(url)
	check(err)
	defer pub.Close()
	start := time.Now()
	for i := range b.n {
		check(pub.Publish("bench.t"+strconv.Itoa(i%b.topics), b.payload))
	}
	check(pub.Flush())
	c.wait(b.n)
	return time.Since(start)
}

// newSink makes a sink of kind on a bus big enough to take a burst of n.
func (b *benchmark) newSink(url, kind string, store bool) (*bus.Bus, *north.Set) {
	bb := bus.New(bus.Options{Queue: b.n + 1, QueueBytes: 1 << 30, MaxTopics: b.topics + 100, TopicQuota: b.topics + 100})
	b.runs++
	sc := config.NorthSink{Name: "bench" + strconv.Itoa(b.runs), Kind: kind, URL: url, Inflight: 256,
		Map: []config.NorthMap{{From: "bench/#", To: "{topic}", QoS: 1}}}
	if store {
		sc.Store = config.NorthStore{Enabled: true, Dir: filepath.Join(b.dir, sc.Name), DrainRate: 1000000, Sync: "interval"}
	}
	cfg := config.Defaults()
	cfg.DataDir = b.dir
	cfg.North.Sinks = []config.NorthSink{sc}
	cfg.Normalize()
	check(cfg.Validate())
	set, err := north.Build(cfg.North, "bench", bb, nil, slog.New(slog.DiscardHandler))
	check(err)
	return bb, set
}

// sink: the bus publishes, a sink carries them to the broker.
func (b *benchmark) sink(url, kind string, store bool) time.Duration {
	bb, set := b.newSink(url, kind, store)
	set.Start()
	defer set.Close()
	waitUp(set)
	var c *counter
	if kind == "mqtt" {
		var cl mqtt.Client
		c, cl = b.mqttSubscriber(url, "bench/#")
		defer cl.Disconnect(0)
	} else {
		nc, err := nats.Connect(url)
		check(err)
		defer nc.Close()
		c = &counter{}
		_, err = nc.Subscribe("bench.>", func(*nats.Msg) { c.got.Add(1) })
		check(err)
		check(nc.Flush())
	}
	start := time.Now()
	for i := range b.n {
		check(bb.Publish(b.topic(i), b.payload, "bench"))
	}
	c.wait(b.n)
	return time.Since(start)
}

// drain: n messages queue while the broker is unreachable (the sink
// points at a relay that is closed), then the link comes up; the time is
// from the link up until the subscriber has them all.
func (b *benchmark) drain(url string) time.Duration {
	relay := newRelay(url[len("tcp://"):])
	bb, set := b.newSink("tcp://"+relay.addr(), "mqtt", true)
	set.Start()
	defer set.Close()
	sub, cl := b.mqttSubscriber(url, "bench/#")
	defer cl.Disconnect(0)
	for i := range b.n {
		check(bb.Publish(b.topic(i), b.payload, "bench"))
	}
	for set.Stats()[0].QueueRecords < int64(b.n) {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	relay.open.Store(true)
	sub.wait(b.n)
	return time.Since(start)
}

func waitUp(set *north.Set) {
	for deadline := time.Now().Add(30 * time.Second); !set.Stats()[0].LinkUp; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			panic("sink never connected")
		}
	}
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
