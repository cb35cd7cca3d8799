package modbus

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/edgemux/edgemux/protocols/modbus/upstream"
	"github.com/edgemux/edgemux/route/bus"
)

// holdingWriter takes writes to the topics it claims and keeps their
// done, for the test to finish as a device would.
type holdingWriter struct{ dones []func(error) }

func (w *holdingWriter) Write(topic string, payload []byte, src string, done func(error)) error {
	if done == nil {
		return errors.New("holdingWriter: a write without done")
	}
	w.dones = append(w.dones, done)
	return nil
}

// countingConn is a memConn that counts Notify calls.
type countingConn struct {
	memConn
	notified int
}

func (c *countingConn) Notify() { c.notified++ }

// TestWriteWaitsForItsDevice: a register-map write to a claimed topic is
// answered only when its device write is done, with the write response,
// 0x04 for a device's refusal or 0x0B for no answer, and what the master
// sent behind it waits its turn; a write touching only unclaimed tags is
// answered at once; past maxPending responses owed, a write is 0x06 and
// reaches no device.
func TestWriteWaitsForItsDevice(t *testing.T) {
	b := bus.New(bus.Options{})
	mustPublish(t, b, "plant/temp", "-21.7")
	w := &holdingWriter{}
	if err := b.Claim("poller", []string{"plant/limit"}, w); err != nil {
		t.Fatal(err)
	}
	h := New(plantMap, b, nil)
	c := &countingConn{}
	sess, _ := h.Open(c)
	s := sess.(*session)

	write := adu(1, 1, 0x06, 0, 102, 0, 7) // plant/limit: claimed
	read := adu(2, 1, 0x04, 0, 0, 0, 1)    // plant/temp
	free := adu(3, 1, 0x05, 0, 0, 0xFF, 0) // plant/pump: not claimed
	if _, err := s.Data(append(append(write, read...), free...)); err != nil {
		t.Fatal(err)
	}
	if len(c.out) != 0 || len(w.dones) != 1 {
		t.Fatalf("answered % x before the device; %d writes", c.out, len(w.dones))
	}
	w.dones[0](nil)
	if c.notified != 1 {
		t.Fatalf("notified %d times, want once", c.notified)
	}
	if err := s.Notified(); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte(nil), write...), adu(2, 1, 0x04, 2, 0xFF, 0x27)...), free...)
	if !bytes.Equal(c.out, want) {
		t.Fatalf("after the device took it: % x\nwant                      % x", c.out, want)
	}

	for i, tc := range []struct {
		err  error
		code byte
	}{
		{fmt.Errorf("%w: exception 0x02", bus.ErrWriteFailed), ServerDeviceFailure},
		{fmt.Errorf("%w: %w", bus.ErrWriteFailed, upstream.ErrTimeout), GatewayTargetFailed},
		{fmt.Errorf("%w: %w", bus.ErrWriteFailed, upstream.ErrUnavailable), GatewayTargetFailed},
	} {
		c.out = nil
		tx := uint16(10 + i)
		if _, err := s.Data(adu(tx, 1, 0x10, 0, 102, 0, 1, 2, 0, 7)); err != nil {
			t.Fatal(err)
		}
		w.dones[len(w.dones)-1](tc.err)
		if err := s.Notified(); err != nil {
			t.Fatal(err)
		}
		if want := adu(tx, 1, 0x90, tc.code); !bytes.Equal(c.out, want) {
			t.Fatalf("%v: % x, want % x", tc.err, c.out, want)
		}
	}

	c.out = nil
	held := len(w.dones)
	var in []byte
	for i := 0; i <= maxPending; i++ {
		in = append(in, adu(uint16(100+i), 1, 0x06, 0, 102, 0, 7)...)
	}
	if _, err := s.Data(in); err != nil {
		t.Fatal(err)
	}
	if got := len(w.dones) - held; got != maxPending {
		t.Fatalf("%d writes reached the device, want %d", got, maxPending)
	}
	for _, done := range w.dones[held:] {
		done(nil)
	}
	if err := s.Notified(); err != nil {
		t.Fatal(err)
	}
	if tail := adu(uint16(100+maxPending), 1, 0x86, ServerDeviceBusy); !bytes.HasSuffix(c.out, tail) ||
		len(c.out) != maxPending*12+len(tail) {
		t.Fatalf("%d bytes ending % x, want %d write echoes and 0x06", len(c.out), c.out[max(0, len(c.out)-12):], maxPending)
	}
}
