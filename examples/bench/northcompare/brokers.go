package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The ceilings: one plain client per broker publishing the same messages
// the same way, and the subscribers every figure waits for.

// counter is a subscriber on the broker counting what arrives.
type counter struct{ got atomic.Int64 }

// wait returns once n have arrived, and gives up (a panic naming the
// count) when none has arrived for stallAfter: a subscriber that lost
// messages would otherwise keep the run waiting for ever.
func (c *counter) wait(n int) {
	last, seen := int64(-1), time.Now()
	for got := c.got.Load(); got < int64(n); got = c.got.Load() {
		if got != last {
			last, seen = got, time.Now()
		} else if time.Since(seen) > stallAfter {
			panic(fmt.Sprintf("stalled: only %d of %d messages arrived, none in the last %v", got, n, stallAfter))
		}
		time.Sleep(time.Millisecond)
	}
}

const stallAfter = 30 * time.Second

// receiver is what a figure waits for: a subscriber's count, or a
// JetStream stream's.
type receiver struct {
	wait  func(n int)
	close func()
}

// receive subscribes to the bench's topics on url: MQTT, core NATS, or
// (stream set) a fresh JetStream stream whose message count is waited for.
func (b *benchmark) receive(url, kind, stream string) receiver {
	switch {
	case kind == "mqtt":
		c, cl := b.mqttSubscriber(url, "bench/#")
		return receiver{c.wait, func() { cl.Disconnect(0) }}
	case stream != "":
		return b.jsStream(url, stream)
	default:
		nc, err := nats.Connect(url)
		check(err)
		c := &counter{}
		_, err = nc.Subscribe("bench.>", func(*nats.Msg) { c.got.Add(1) })
		check(err)
		check(nc.Flush())
		return receiver{c.wait, nc.Close}
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
func (b *benchmark) mqttDirect(url string) result {
	rc := b.receive(url, "mqtt", "")
	defer rc.close()
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
	rc.wait(b.n)
	return result{count: b.n, d: time.Since(start)}
}

// natsDirect: one nats.go connection publishing, flushed at the end.
func (b *benchmark) natsDirect(url string) result {
	rc := b.receive(url, "nats", "")
	defer rc.close()
	pub, err := nats.Connect(url)
	check(err)
	defer pub.Close()
	start := time.Now()
	for i := range b.n {
		check(pub.Publish("bench.t"+strconv.Itoa(i%b.topics), b.payload))
	}
	check(pub.Flush())
	rc.wait(b.n)
	return result{count: b.n, d: time.Since(start)}
}

// jsStream is the bench's stream, made afresh (file storage), and a wait
// for its message count.
const jsStream = "BENCH"

func (b *benchmark) jsStream(url, name string) receiver {
	nc, err := nats.Connect(url)
	check(err)
	js, err := jetstream.New(nc)
	check(err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = js.DeleteStream(ctx, name) // the previous run's
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"bench.>"}, Storage: jetstream.FileStorage})
	check(err)
	wait := func(n int) {
		for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			info, err := s.Info(ctx)
			cancel()
			check(err)
			if info.State.Msgs >= uint64(n) {
				return
			}
			if time.Now().After(deadline) {
				panic(fmt.Sprintf("the stream holds only %d of %d messages", info.State.Msgs, n))
			}
		}
	}
	return receiver{wait, nc.Close}
}

// jsDirect: one nats.go JetStream client publishing asynchronously with
// at most inflight PubAcks pending (PublishAsync blocks past that).
func (b *benchmark) jsDirect(url string) result {
	rc := b.receive(url, "nats", jsStream)
	defer rc.close()
	nc, err := nats.Connect(url)
	check(err)
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(b.inflight))
	check(err)
	start := time.Now()
	for i := range b.n {
		_, err := js.PublishAsync("bench.t"+strconv.Itoa(i%b.topics), b.payload)
		check(err)
	}
	<-js.PublishAsyncComplete()
	rc.wait(b.n)
	return result{count: b.n, d: time.Since(start)}
}

// mosquittoPub runs Debian's mosquitto_pub sending n QoS 1 messages of
// the payload on one topic, and returns the messages the broker counted
// from it ($SYS/broker/publish/messages/received, read before and
// after) over its wall time, start and connect included, and that
// count. Two ways: lines, -l with one message a line of stdin; or -m
// with --repeat n. The count matters: measured here (mosquitto 2.0.11),
// -l exits at the end of its input with most messages never sent
// (23,186-34,468 of 100,000 reached the broker), so n over its time
// overstated it threefold or more; --repeat sent 81,825-100,000.
func (b *benchmark) mosquittoPub(url string, lines bool) (float64, int64) {
	host, port, err := net.SplitHostPort(strings.TrimPrefix(url, "tcp://"))
	check(err)
	args := []string{"-h", host, "-p", port, "-q", "1", "-t", "bench/mosquitto_pub"}
	var cmd *exec.Cmd
	if lines {
		path := filepath.Join(b.dir, "mosquitto_pub.lines")
		check(os.WriteFile(path, bytes.Repeat(append(slices.Clone(b.payload), '\n'), b.n), 0o600))
		in, err := os.Open(path)
		check(err)
		defer in.Close()
		cmd = exec.Command("mosquitto_pub", append(args, "-l")...)
		cmd.Stdin = in
	} else {
		cmd = exec.Command("mosquitto_pub", append(args, "-m", string(b.payload), "--repeat", strconv.Itoa(b.n))...)
	}
	before := brokerReceived(url)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		fmt.Printf("mosquitto_pub: %v\n%s\n", err, out)
		return 0, 0
	}
	got := brokerReceived(url) - before
	return float64(got) / took.Seconds(), got
}

// brokerReceived is mosquitto's count of PUBLISH packets received from
// clients, read once the broker has published it anew (sys_interval is
// 1 s in the bench's mosquitto.conf; the value is retained).
func brokerReceived(url string) int64 {
	time.Sleep(1100 * time.Millisecond)
	cl := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(url).SetClientID("bench-sys"))
	tok := cl.Connect()
	tok.Wait()
	check(tok.Error())
	defer cl.Disconnect(0)
	got := make(chan int64, 1)
	tok = cl.Subscribe("$SYS/broker/publish/messages/received", 0, func(_ mqtt.Client, m mqtt.Message) {
		n, err := strconv.ParseInt(string(m.Payload()), 10, 64)
		check(err)
		select {
		case got <- n:
		default:
		}
	})
	tok.Wait()
	check(tok.Error())
	select {
	case n := <-got:
		return n
	case <-time.After(10 * time.Second):
		panic("mosquitto published no $SYS/broker/publish/messages/received")
	}
}

// mosquittoPubRows compares bus -> MQTT, without and with a store, with
// mosquitto_pub's figure, timed its way (until every PUBACK is in, no
// subscriber): the better of its two ways, counted at the broker.
func (b *benchmark) mosquittoPubRows(url string) {
	var top float64
	for _, lines := range []bool{false, true} {
		what := "mosquitto_pub -q 1 -m --repeat n (Debian's, one topic)"
		if lines {
			what = "mosquitto_pub -q 1 -l, n lines (Debian's, one topic)"
		}
		var got int64
		rate := b.figure(what, "counted at the broker", func() float64 {
			r, n := b.mosquittoPub(url, lines)
			got = n
			return r
		})
		if rate > 0 {
			fmt.Printf("%-62s %d of %d messages reached the broker (its $SYS count), in its time, start included\n", "", got, b.n)
		}
		top = max(top, rate)
	}
	if top <= 0 {
		return
	}
	b.rowAgainst("edgemux bus -> mqtt (QoS 1), as mosquitto_pub times it", top, func() result { return b.sinkToAcked(url, "mqtt", false) })
	b.rowAgainst("edgemux bus -> mqtt (QoS 1, store), as mosquitto_pub times it", top, func() result { return b.sinkToAcked(url, "mqtt", true) })
}

// natsBenchRounds compares bus -> core NATS, without and with a store,
// and the drain after an outage (first round only) with `nats bench
// pub`'s own figure, timed the way it times itself: its
// publisher, to the last flush, no subscriber. Each round runs nats bench
// and then the two rows, so every share is of a figure taken moments
// before; with rounds > 1 the median share of each row is printed too,
// as one round on a shared machine can land on a neighbour's burst.
func (b *benchmark) natsBenchRounds(bin, url string, rounds int) {
	rows := []struct {
		what string
		run  func() result
		once bool // in the first round only (the outage takes a minute)
	}{
		{"edgemux bus -> nats (core, QoS 1), as nats bench times it", func() result { return b.sinkToAcked(url, "nats", false) }, false},
		{"edgemux bus -> nats (core, QoS 1, store), as nats bench times it", func() result { return b.sinkToAcked(url, "nats", true) }, false},
		{fmt.Sprintf("edgemux nats drain after a %v outage, as nats bench times it", b.outage), func() result { return b.outageDrainToFlush(url) }, true},
	}
	shares := make([][]float64, len(rows))
	for round := range max(rounds, 1) {
		top := b.figure("nats bench pub (natscli, same n and size)", "its own report", func() float64 { return b.natsBench(bin, url) })
		if top <= 0 {
			return
		}
		for i, r := range rows {
			if r.once && round > 0 {
				continue
			}
			if share := b.rowAgainst(r.what, top, r.run); share > 0 {
				shares[i] = append(shares[i], share)
			}
		}
	}
	if rounds < 2 {
		return
	}
	for i, r := range rows {
		if len(shares[i]) > 1 {
			slices.Sort(shares[i])
			fmt.Printf("%-62s median %4.0f %% of nats bench over %d rounds (%.0f-%.0f %%)\n", r.what, 100*shares[i][len(shares[i])/2], len(shares[i]),
				100*shares[i][0], 100*shares[i][len(shares[i])-1])
		}
	}
}

// natsBench runs natscli's `nats bench pub` (one client, the same count
// and size) and returns the msgs/s it reports; 0 (and the output) when
// its output has no figure.
func (b *benchmark) natsBench(bin, url string) float64 {
	out, err := exec.Command(bin, "bench", "pub", "bench.natscli", "--server", url, "--msgs", strconv.Itoa(b.n),
		"--size", strconv.Itoa(len(b.payload))+"B", "--clients", "1", "--no-progress",
		"--multisubject", "--multisubjectmax", strconv.Itoa(b.topics)).CombinedOutput()
	m := regexp.MustCompile(`([0-9][0-9,]*) msgs/sec`).FindSubmatch(out)
	if err != nil || m == nil {
		fmt.Printf("nats bench: %v\n%s\n", err, out)
		return 0
	}
	v, _ := strconv.Atoi(strings.ReplaceAll(string(m[1]), ",", ""))
	return float64(v)
}
