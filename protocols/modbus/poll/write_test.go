package poll

import (
	"errors"
	"testing"
	"time"

	goburrow "github.com/goburrow/modbus"

	"github.com/edgemux/edgemux/protocols/modbus/upstream"
	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
	"github.com/edgemux/edgemux/route/bus"
)

type writeOutcome struct {
	OK  bool   `json:"ok"`
	V   any    `json:"v"`
	Err string `json:"err"`
	TS  int64  `json:"ts"`
}

func lastResult(t *testing.T, b *bus.Bus, topic string) (writeOutcome, bool) {
	t.Helper()
	return lastJSON[writeOutcome](t, b, ResultTopic(topic))
}

// TestWriteThroughBus: with the poller's topics claimed, publishes from
// another protocol's src write pymodbus (FC 6 scaled, FC 16 a float32,
// FC 5 a coil, one read back); the next polls read the new values; a
// read-only tag and a value out of range are refused at once and a
// device exception (a register pymodbus lacks) is the write's outcome;
// none of them ever shows in the tag's cached value.
func TestWriteThroughBus(t *testing.T) {
	addr := upstreamtest.TCPDevice(t, 1)
	line := upstream.NewLine(upstream.LineConfig{Name: "plc", Kind: upstream.KindTCP, Address: addr}, nil)
	dev := line.AddDevice(upstream.DeviceConfig{Name: "plc1", Unit: 1, Timeout: 2 * time.Second, Retries: 2})
	line.Start()
	t.Cleanup(line.Close)
	b := bus.New(bus.Options{})
	wtag := func(topic string, tb Table, a int, typ Type) PolledTag {
		return PolledTag{Tag: Tag{Topic: topic, Table: tb, Address: a, Type: typ}, Writable: true}
	}
	sp := wtag("w/sp", Holding, 10, I16)
	sp.Scale = 0.1
	f := wtag("w/f", Holding, 20, F32)
	f.ReadBack = true
	tags := []PolledTag{sp, f, wtag("w/c", Coil, 3, Bool), wtag("w/far", Holding, 3000, U16),
		{Tag: Tag{Topic: "w/ro", Table: Holding, Address: 11, Type: U16}}}
	p := New([]Device{{Dev: dev, Interval: time.Hour, Tags: tags}}, b, nil)
	if err := b.Claim(Source, p.Topics(), p); err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Close)
	upstreamtest.Wait(t, "the first poll", func() bool { return p.Stats()[0].Polls >= 1 })

	for topic, v := range map[string]string{"w/sp": "-12.3", "w/f": "22.5", "w/c": "false"} {
		if err := b.Publish(topic, []byte(v), "ws"); err != nil {
			t.Fatalf("write %s: %v", topic, err)
		}
	}
	want := map[string]any{"w/sp": -12.3, "w/f": 22.5, "w/c": false}
	upstreamtest.Wait(t, "three writes done and polled", func() bool {
		for topic, v := range want {
			got, ok := lastPayload(t, b, topic)
			if r, done := lastResult(t, b, topic); !done || !r.OK || !ok || got.Q != "good" || got.V != v {
				return false
			}
		}
		return true
	})
	if r, _ := lastResult(t, b, "w/f"); r.V != 22.5 {
		t.Fatalf("read-back of w/f: %+v", r)
	}

	if err := b.Publish("w/ro", []byte("7"), "ws"); !errors.Is(err, bus.ErrNotWritable) {
		t.Fatalf("read-only tag: %v", err)
	}
	if err := b.Publish("w/sp", []byte("4000"), "ws"); !errors.Is(err, bus.ErrWriteValue) {
		t.Fatalf("value out of range: %v", err)
	}
	if err := b.Publish(ResultTopic("w/sp"), []byte(`{"ok":true}`), "ws"); !errors.Is(err, bus.ErrNotWritable) {
		t.Fatalf("a forged result: %v", err)
	}
	if err := b.Publish("w/far", []byte("5"), "ws"); err != nil {
		t.Fatal(err)
	}
	upstreamtest.Wait(t, "the refused write's outcome", func() bool { _, ok := lastResult(t, b, "w/far"); return ok })
	if r, _ := lastResult(t, b, "w/far"); r.OK || r.Err != "exception 0x02" {
		t.Fatalf("device exception: %+v", r)
	}
	if got, _ := lastPayload(t, b, "w/ro"); got.V != 1011.0 {
		t.Fatalf("read-only tag shows %v, want pymodbus's 1011", got.V)
	}
	if got, _ := lastPayload(t, b, "w/sp"); got.V != -12.3 {
		t.Fatalf("w/sp shows %v after refused writes", got.V)
	}
	if got, _ := lastPayload(t, b, "w/far"); got.Q != "bad" || got.V != nil {
		t.Fatalf("w/far shows %+v, want bad (pymodbus has no register 3000)", got)
	}
	st := p.Stats()[0]
	if st.Writes != 4 || st.WritesOK != 3 || st.WritesBad != 1 {
		t.Fatalf("stats %+v: want 4 writes, 3 ok, 1 failed", st)
	}
}

// TestWriteDoneTellsTheWriter: a write published with bus.PublishDone is
// done only once pymodbus holds the value (read from it directly right
// after), with read-back too; a device exception is an error wrapping
// bus.ErrWriteFailed and the Exception; a unit id pymodbus does not
// serve is upstream.ErrTimeout after the device's timeout.
func TestWriteDoneTellsTheWriter(t *testing.T) {
	addr := upstreamtest.TCPDevice(t, 1)
	line := upstream.NewLine(upstream.LineConfig{Name: "plc", Kind: upstream.KindTCP, Address: addr}, nil)
	dev := line.AddDevice(upstream.DeviceConfig{Name: "plc1", Unit: 1, Timeout: 2 * time.Second})
	silent := line.AddDevice(upstream.DeviceConfig{Name: "gone", Unit: 9, Timeout: 300 * time.Millisecond})
	line.Start()
	t.Cleanup(line.Close)
	b := bus.New(bus.Options{})
	wtag := func(topic string, a int, readBack bool) PolledTag {
		return PolledTag{Tag: Tag{Topic: topic, Table: Holding, Address: a, Type: U16}, Writable: true, ReadBack: readBack}
	}
	p := New([]Device{
		{Dev: dev, Interval: time.Hour, Tags: []PolledTag{wtag("d/a", 30, false), wtag("d/rb", 31, true), wtag("d/far", 3000, false)}},
		{Dev: silent, Interval: time.Hour, Tags: []PolledTag{wtag("g/a", 1, false)}},
	}, b, nil)
	if err := b.Claim(Source, p.Topics(), p); err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Close)

	h := goburrow.NewTCPClientHandler(addr)
	h.SlaveId, h.Timeout = 1, 10*time.Second
	t.Cleanup(func() { h.Close() })
	device := goburrow.NewClient(h)
	holding := func(a uint16) uint16 {
		t.Helper()
		b, err := device.ReadHoldingRegisters(a, 1)
		if err != nil {
			t.Fatal(err)
		}
		return uint16(b[0])<<8 | uint16(b[1])
	}
	// write publishes and waits for done; pymodbus is read right after.
	write := func(topic, v string) error {
		t.Helper()
		out := make(chan error, 1)
		if err := b.PublishDone(nil, topic, []byte(v), "private", func(err error) { out <- err }); err != nil {
			t.Fatalf("%s: refused: %v", topic, err)
		}
		select {
		case err := <-out:
			return err
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: never done", topic)
		}
		return nil
	}
	if err := write("d/a", "4242"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if held := holding(30); held != 4242 {
		t.Fatalf("pymodbus holds %d right after the write was done, want 4242", held)
	}
	if err := write("d/rb", "77"); err != nil {
		t.Fatalf("write with read-back: %v", err)
	}
	if held := holding(31); held != 77 {
		t.Fatalf("pymodbus holds %d right after the write with read-back was done, want 77", held)
	}
	var exc Exception
	if err := write("d/far", "5"); !errors.Is(err, bus.ErrWriteFailed) || !errors.As(err, &exc) || exc != 2 {
		t.Fatalf("a write pymodbus refuses: %v, want ErrWriteFailed, exception 0x02", err)
	}
	if err := write("g/a", "5"); !errors.Is(err, bus.ErrWriteFailed) || !errors.Is(err, upstream.ErrTimeout) {
		t.Fatalf("a write nobody answers: %v, want ErrWriteFailed, ErrTimeout", err)
	}
}

// TestHoldsWritten: a read-back matches the request that wrote it, for
// each write function EncodeWrite makes, and a different value does not.
func TestHoldsWritten(t *testing.T) {
	enc := func(tag Tag, v string) []byte {
		t.Helper()
		pdu, err := EncodeWrite(tag, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return pdu
	}
	coil := enc(Tag{Table: Coil, Address: 3, Type: Bool}, "true")
	reg := enc(Tag{Table: Holding, Address: 10, Type: U16}, "4242")
	wide := enc(Tag{Table: Holding, Address: 20, Type: F32}, "22.5")
	for _, tc := range []struct {
		name string
		pdu  []byte
		data []byte
		want bool
	}{
		{"coil on", coil, []byte{1}, true},
		{"coil off", coil, []byte{0}, false},
		{"register", reg, []byte{0x10, 0x92}, true},
		{"register changed", reg, []byte{0x10, 0x93}, false},
		{"float32", wide, []byte{0x41, 0xB4, 0, 0}, true},
		{"float32 changed", wide, []byte{0x41, 0xB4, 0, 1}, false},
		{"short", wide, []byte{0x41}, false},
	} {
		if got := holdsWritten(tc.pdu, tc.data); got != tc.want {
			t.Errorf("%s: % x over % x: %v, want %v", tc.name, tc.pdu, tc.data, got, tc.want)
		}
	}
}
