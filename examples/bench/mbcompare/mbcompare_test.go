package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/examples/mbsim"
	"github.com/edgemux/edgemux/gateway"
	"github.com/edgemux/edgemux/route/bus"
)

// TestEdgemuxPollsTheLayout: the benchmark's gateway configuration polls
// the simulator and publishes every tag decoded to the value the device
// held: device 0's first two polls, tag by tag, in order.
func TestEdgemuxPollsTheLayout(t *testing.T) {
	sim, err := mbsim.Start(mbsim.Config{Devices: 3, Net: "127.3"})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	var addrs []string
	for _, a := range sim.Addrs() {
		addrs = append(addrs, a.String())
	}
	cfg, err := config.Parse(pollYAML(addrs, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := g.Bus().NewSubscriber(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SubscribeLive("m/0/#"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() { cancel(); <-done }()

	want := 2 * len(mbsim.Tags)
	var got []bus.Message
	for deadline := time.Now().Add(time.Minute); len(got) < want && time.Now().Before(deadline); {
		got = sub.Drain(got, 0).Msgs
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) < want {
		t.Fatalf("%d messages, want %d", len(got), want)
	}
	for j, m := range got[:want] {
		k, gen := j%len(mbsim.Tags), uint64(j/len(mbsim.Tags)+1)
		if topic := fmt.Sprintf("m/0/%d", mbsim.Tags[k].Address); m.Topic != topic {
			t.Fatalf("message %d on %s, want %s", j, m.Topic, topic)
		}
		var p struct {
			V float64 `json:"v"`
			Q string  `json:"q"`
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			t.Fatalf("message %d: %s: %v", j, m.Payload, err)
		}
		if p.Q != "good" || p.V != mbsim.Expected(k, gen) {
			t.Fatalf("message %d (%s, poll %d): %s, want %v good", j, mbsim.Tags[k].Type, gen, m.Payload, mbsim.Expected(k, gen))
		}
	}
}

// TestDecodeLayout: the plain loop's hand decoder reads what the
// simulator holds.
func TestDecodeLayout(t *testing.T) {
	regs := make([]byte, 2*mbsim.Registers)
	values := make([]float64, len(mbsim.Tags))
	for _, gen := range []uint64{1, 40000, 1 << 33} {
		mbsim.Fill(regs, gen)
		decodeLayout(regs, values)
		for k := range values {
			if values[k] != mbsim.Expected(k, gen) {
				t.Fatalf("generation %d tag %d (%s): %v, want %v", gen, k, mbsim.Tags[k].Type, values[k], mbsim.Expected(k, gen))
			}
		}
	}
}

// TestServerMap: the register map the masters read validates, and its
// first 20 registers are tags (a read of them is not exception 02).
func TestServerMap(t *testing.T) {
	cfg, err := config.Parse(serverYAML())
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	end := 0
	for _, tag := range cfg.Modbus.Tags {
		if tag.Address != end {
			t.Fatalf("gap before %s at %d", tag.Topic, tag.Address)
		}
		end += width(tag.Type)
	}
	if end < 20 {
		t.Fatalf("%d registers, the masters read 20", end)
	}
}

// TestMastersAgainstSim: the masters' loop counts answers and no errors
// against a plain server.
func TestMastersAgainstSim(t *testing.T) {
	sim, err := mbsim.Start(mbsim.Config{Devices: 1, Net: "127.3"})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	var out strings.Builder
	stdout = &out
	defer func() { stdout = os.Stdout }()
	if err := masters(context.Background(), sim.Addrs()[0].String(), 4, 20, window{length: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	line := out.String()[strings.Index(out.String(), "result"):]
	f := fields(line)
	if n, _ := strconv.Atoi(f["answers"]); n == 0 || f["errors"] != "0" {
		t.Fatalf("%s", line)
	}
}
