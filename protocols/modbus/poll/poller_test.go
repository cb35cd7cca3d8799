package poll

import (
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/modbus/upstream"
	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
	"github.com/edgemux/edgemux/route/bus"
)

type payload struct {
	V   any    `json:"v"`
	Q   string `json:"q"`
	TS  int64  `json:"ts"`
	Err string `json:"err"`
}

// lastJSON is topic's last value on b, decoded as JSON into a T; false
// when the topic has none.
func lastJSON[T any](t *testing.T, b *bus.Bus, topic string) (T, bool) {
	t.Helper()
	var v T
	m, ok := b.Get(topic)
	if !ok {
		return v, false
	}
	if err := json.Unmarshal(m.Payload, &v); err != nil {
		t.Fatalf("%s: %q: %v", topic, m.Payload, err)
	}
	return v, true
}

func lastPayload(t *testing.T, b *bus.Bus, topic string) (payload, bool) {
	t.Helper()
	return lastJSON[payload](t, b, topic)
}

func startPoller(t *testing.T, devs []Device, b *bus.Bus) *Poller {
	t.Helper()
	p := New(devs, b, nil)
	p.Start()
	t.Cleanup(p.Close)
	return p
}

// TestPollPymodbus: pymodbus over TCP (holding i = 1000+i, input i =
// 2000+i, coil i = i%2); seven tags in three tables are read with three
// requests per poll (two holding tags a register apart bridged by
// max_gap), decoded and published good with the poll's timestamp.
func TestPollPymodbus(t *testing.T) {
	addr := upstreamtest.TCPDevice(t, 1)
	line := upstream.NewLine(upstream.LineConfig{Name: "plc", Kind: upstream.KindTCP, Address: addr}, nil)
	dev := line.AddDevice(upstream.DeviceConfig{Name: "plc1", Unit: 1, Timeout: 2 * time.Second, Retries: 2})
	line.Start()
	t.Cleanup(line.Close)
	b := bus.New(bus.Options{})
	tag := func(topic string, tb Table, addr int, typ Type) PolledTag {
		return PolledTag{Tag: Tag{Topic: topic, Table: tb, Address: addr, Type: typ}}
	}
	scaled := tag("p/in5", Input, 5, I16)
	scaled.Scale, scaled.Offset = 0.5, -1
	bit := tag("p/bit", Holding, 3, Bool)
	bit.Bit = 0 // 1003 is odd
	tags := []PolledTag{tag("p/h0", Holding, 0, U16), tag("p/h1", Holding, 1, U32), bit, tag("p/h5", Holding, 5, U16),
		scaled, tag("p/c3", Coil, 3, Bool), tag("p/c4", Coil, 4, Bool)}
	before := time.Now().UnixMilli()
	p := startPoller(t, []Device{{Dev: dev, Interval: 50 * time.Millisecond, Limits: Limits{MaxGap: 1}, Tags: tags}}, b)
	upstreamtest.Wait(t, "two polls", func() bool { return p.Stats()[0].Polls >= 2 })
	want := map[string]any{"p/h0": 1000.0, "p/h1": float64(1001<<16 | 1002), "p/bit": true, "p/h5": 1005.0,
		"p/in5": 2005*0.5 - 1, "p/c3": true, "p/c4": false}
	for topic, v := range want {
		got, ok := lastPayload(t, b, topic)
		if !ok || got.Q != "good" || got.V != v || got.TS < before || got.TS > time.Now().UnixMilli() {
			t.Errorf("%s: got %+v (cached %v), want %v, good, ts from %d", topic, got, ok, v, before)
		}
	}
	if n := len(p.devs[0].reads); n != 3 {
		t.Fatalf("planned %d reads a poll, want 3", n)
	}
	p.Close()
	// Close may cut a poll short, so the counters hold the finished
	// polls plus part of one more: fewer than 3 reads and 7 samples.
	st := p.Stats()[0]
	if st.Reads < 3*st.Polls || st.Reads >= 3*(st.Polls+1) || st.Failed != 0 || st.Refused != 0 ||
		st.Published < 7*st.Polls || st.Published >= 7*(st.Polls+1) {
		t.Fatalf("stats %+v: want 3 reads and 7 samples a poll, no failures", st)
	}
	// A request cut short by Close may have reached the device uncounted.
	if h := dev.Health(); h.Requests != st.Reads && h.Requests != st.Reads+1 {
		t.Fatalf("device saw %d requests, the poller sent %d", h.Requests, st.Reads)
	}
}

// TestPollRefusedAndDown: a tag past pymodbus's registers is refused
// with its exception (bad, v null, never a zero), and a device on a line
// that cannot connect is bad too; on change, each is published once.
func TestPollRefusedAndDown(t *testing.T) {
	addr := upstreamtest.TCPDevice(t, 1)
	line := upstream.NewLine(upstream.LineConfig{Name: "plc", Kind: upstream.KindTCP, Address: addr}, nil)
	dev := line.AddDevice(upstream.DeviceConfig{Name: "plc1", Unit: 1, Timeout: 2 * time.Second, Retries: 2})
	line.Start()
	t.Cleanup(line.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now
	deadLine := upstream.NewLine(upstream.LineConfig{Name: "dead", Kind: upstream.KindTCP, Address: dead}, nil)
	deadDev := deadLine.AddDevice(upstream.DeviceConfig{Name: "gone", Unit: 1, Timeout: 200 * time.Millisecond})
	deadLine.Start()
	t.Cleanup(deadLine.Close)
	b := bus.New(bus.Options{})
	p := startPoller(t, []Device{
		{Dev: dev, Interval: 20 * time.Millisecond, OnChange: true, Tags: []PolledTag{{Tag: Tag{Topic: "r/far", Table: Holding, Address: 5000, Type: U16}}}},
		{Dev: deadDev, Interval: 20 * time.Millisecond, OnChange: true, Tags: []PolledTag{{Tag: Tag{Topic: "r/dead", Table: Holding, Type: U16}}}},
	}, b)
	upstreamtest.Wait(t, "five polls each", func() bool { s := p.Stats(); return s[0].Polls >= 5 && s[1].Polls >= 5 })
	for _, topic := range []string{"r/far", "r/dead"} {
		got, ok := lastPayload(t, b, topic)
		if !ok || got.Q != "bad" || got.V != nil || got.Err == "" {
			t.Errorf("%s: got %+v, want bad with v null and an error", topic, got)
		}
	}
	p.Close()
	st := p.Stats()
	if st[0].Refused != st[0].Reads || st[0].Published != 1 || st[1].Failed != st[1].Reads || st[1].Published != 1 {
		t.Fatalf("stats %+v: want every read refused or failed, one sample each on change", st)
	}
}

// TestPublishDecision: on change, a value within the deadband is not
// published, one beyond it is; a failed poll after good ones is stale
// (the last value and its time) once, then good again when read; every
// poll publishes everything.
func TestPublishDecision(t *testing.T) {
	t0 := time.Unix(1000, 0)
	num := func(f float64) Value { return Value{Kind: KindFloat, F: f} }
	type step struct {
		v    float64
		why  string
		want Quality // 0: not published
	}
	steps := []step{{10, "", Good}, {10.4, "", 0}, {10.6, "", Good}, {0, "timeout", Stale}, {0, "timeout", 0},
		{10.6, "", Good}, {10.6, "", 0}}
	var s tagState
	for i, st := range steps {
		now := t0.Add(time.Duration(i) * time.Second)
		sample := s.next(num(st.v), now, st.why, false)
		got := Quality(0)
		if s.publish(sample, true, 0.5) {
			got = sample.Q
		}
		if got != st.want {
			t.Fatalf("step %d %+v: published %v, want %v", i, st, got, st.want)
		}
		if sample.Q == Stale && (sample.V != num(10.6) || !sample.TS.Equal(t0.Add(2*time.Second))) {
			t.Fatalf("stale sample %+v: want the last good value and its time", sample)
		}
	}
	var every tagState
	for range 3 {
		if !every.publish(every.next(num(1), t0, "", false), false, 0) {
			t.Fatal("every poll: a poll not published")
		}
	}
	refused := s.next(Value{}, t0, "exception 0x02", true)
	if refused.Q != Bad || string(refused.AppendPayload(nil)) != `{"v":null,"q":"bad","ts":1000000,"err":"exception 0x02"}` {
		t.Fatalf("refused: %s", refused.AppendPayload(nil))
	}
}

// TestOnChangeRetriesRefused: on change, a sample the bus refused (its
// cache full) is not taken as published: each poll offers it again, and
// once the cache has room the value arrives although it never changed.
func TestOnChangeRetriesRefused(t *testing.T) {
	addr := upstreamtest.TCPDevice(t, 1)
	line := upstream.NewLine(upstream.LineConfig{Name: "plc", Kind: upstream.KindTCP, Address: addr}, nil)
	dev := line.AddDevice(upstream.DeviceConfig{Name: "plc1", Unit: 1, Timeout: 2 * time.Second, Retries: 2})
	line.Start()
	t.Cleanup(line.Close)
	b := bus.New(bus.Options{MaxTopics: 1})
	if err := b.Publish("junk", []byte("x"), "test"); err != nil {
		t.Fatal(err)
	}
	p := startPoller(t, []Device{{Dev: dev, Interval: 20 * time.Millisecond, OnChange: true,
		Tags: []PolledTag{{Tag: Tag{Topic: "r/h0", Table: Holding, Type: U16}}}}}, b)
	upstreamtest.Wait(t, "three refused samples", func() bool { return p.Stats()[0].Dropped >= 3 })
	if _, ok := b.Get("r/h0"); ok {
		t.Fatal("a refused sample is in the cache")
	}
	b.Forget("junk")
	upstreamtest.Wait(t, "the unchanged value published", func() bool { got, ok := lastPayload(t, b, "r/h0"); return ok && got.V == 1000.0 })
	p.Close()
	if st := p.Stats()[0]; st.Published != 1 {
		t.Fatalf("stats %+v: want the value published once, when the bus took it", st)
	}
}

// TestSilentDevicePollerRTU: three devices polled on one RTU line
// (pymodbus on a socat pty pair answers units 1 and 2; unit 3 is
// silent). Once the silent one is demoted, counted per poll cycle over
// twenty cycles of each live device: every live cycle makes its two reads
// and both are answered (no failure, every tag published), and the silent
// device costs the line no attempt at all (its timeouts stay where they
// were) while its own cycles go on failing at once, published bad.
func TestSilentDevicePollerRTU(t *testing.T) {
	path := upstreamtest.RTUDevice(t, 19200, 1, 2)
	line := upstream.NewLine(upstream.LineConfig{Name: "rtu", Kind: upstream.KindRTU, Address: path, Baud: 19200, Parity: "N"}, nil)
	a := line.AddDevice(upstream.DeviceConfig{Name: "a", Unit: 1, Timeout: time.Second, Retries: 3, ProbeEvery: 50 * time.Millisecond})
	b2 := line.AddDevice(upstream.DeviceConfig{Name: "b", Unit: 2, Timeout: time.Second, Retries: 3, ProbeEvery: 50 * time.Millisecond})
	dead := line.AddDevice(upstream.DeviceConfig{Name: "dead", Unit: 3, Timeout: 200 * time.Millisecond, Retries: 1, DemoteAfter: 2, ProbeEvery: time.Hour})
	line.Start()
	t.Cleanup(line.Close)
	tags := func(prefix string) []PolledTag {
		return []PolledTag{{Tag: Tag{Topic: prefix + "/h0", Table: Holding, Type: U16}},
			{Tag: Tag{Topic: prefix + "/h1", Table: Holding, Address: 1, Type: U16}},
			{Tag: Tag{Topic: prefix + "/c3", Table: Coil, Address: 3, Type: Bool}}}
	}
	b := bus.New(bus.Options{})
	p := startPoller(t, []Device{{Dev: a, Interval: 20 * time.Millisecond, Tags: tags("a")},
		{Dev: b2, Interval: 20 * time.Millisecond, Tags: tags("b")},
		{Dev: dead, Interval: 20 * time.Millisecond, Tags: tags("dead")}}, b)
	upstreamtest.Wait(t, "the silent device demoted, the others read", func() bool {
		got, ok := lastPayload(t, b, "b/h0")
		return dead.Health().Demoted && ok && got.V == 1000.0
	})
	before, deadBefore := p.Stats(), dead.Health()
	upstreamtest.Wait(t, "twenty more cycles of each live device", func() bool {
		s := p.Stats()
		return s[0].Polls >= before[0].Polls+20 && s[1].Polls >= before[1].Polls+20
	})
	p.Close()
	after, deadAfter := p.Stats(), dead.Health()
	// A snapshot may fall inside a cycle (its first read counted, not the
	// cycle): per-cycle counts hold to within that one cycle.
	near := func(got, perCycle, cycles uint64) bool {
		return got+perCycle >= perCycle*cycles && got <= perCycle*cycles+perCycle
	}
	for i := range 2 {
		polls := after[i].Polls - before[i].Polls
		if !near(after[i].Reads-before[i].Reads, 2, polls) || after[i].Failed != before[i].Failed || after[i].Refused != 0 ||
			!near(after[i].Published-before[i].Published, 3, polls) {
			t.Fatalf("live device %s over %d cycles: before %+v after %+v; want 2 reads answered and 3 samples a cycle",
				after[i].Device, polls, before[i], after[i])
		}
	}
	deadPolls := after[2].Polls - before[2].Polls
	if deadAfter.Timeouts != deadBefore.Timeouts || deadPolls == 0 || !near(after[2].Failed-before[2].Failed, 2, deadPolls) {
		t.Fatalf("silent device: health %+v -> %+v, stats %+v -> %+v; want no attempt on the line, its cycles failing at once",
			deadBefore, deadAfter, before[2], after[2])
	}
	if got, _ := lastPayload(t, b, "dead/h0"); got.Q != "bad" {
		t.Fatalf("silent device's tag: %+v, want bad", got)
	}
}
