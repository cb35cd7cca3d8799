package private

import (
	"fmt"
	"testing"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// holdingWriter takes writes to the topics it claims and keeps their
// done, for the test to finish as a device would.
type holdingWriter struct{ dones []func(error) }

func (w *holdingWriter) Write(topic string, payload []byte, src string, done func(error)) error {
	w.dones = append(w.dones, done)
	return nil
}

// TestSessionHoldsWriteAcks: a PUB with a msg id to a claimed topic gets
// no ACK until its write is done (a PUB to another topic is acknowledged
// at once meanwhile), then status 0 or WRITE_FAILED; a PUB without a msg
// id is fire and forget; past maxHeldAcks waiting, BUSY and nothing
// written.
func TestSessionHoldsWriteAcks(t *testing.T) {
	b := newBus(bus.Options{})
	w := &holdingWriter{}
	if err := b.Claim("poller", []string{"dev/sp"}, w); err != nil {
		t.Fatal(err)
	}
	ts := openSession(t, New(config.Private{}, b, nil))
	ts.hello()
	if err := ts.feed(pubFrame(7, "dev/sp", "1"), pubFrame(8, "plain/v", "2")); err != nil {
		t.Fatal(err)
	}
	ts.expectAck(8, CodeOK)
	if len(w.dones) != 1 || w.dones[0] == nil {
		t.Fatalf("the write's done: %d", len(w.dones))
	}
	w.dones[0](nil)
	if n := ts.conn.notifies.Load(); n != 1 {
		t.Fatalf("notified %d times, want once", n)
	}
	if err := ts.sess.(protocols.Notified).Notified(); err != nil {
		t.Fatal(err)
	}
	ts.expectAck(7, CodeOK)

	if err := ts.feed(pubFrame(9, "dev/sp", "3")); err != nil {
		t.Fatal(err)
	}
	w.dones[1](fmt.Errorf("%w: exception 0x02", bus.ErrWriteFailed))
	if err := ts.sess.(protocols.Notified).Notified(); err != nil {
		t.Fatal(err)
	}
	ts.expectAck(9, CodeWriteFailed)

	if err := ts.feed(pubFrame(0, "dev/sp", "4")); err != nil {
		t.Fatal(err)
	}
	if len(w.dones) != 3 || w.dones[2] != nil {
		t.Fatal("a PUB without a msg id asked for the write's outcome")
	}
	if fs := ts.conn.frames(t); len(fs) != 0 {
		t.Fatalf("fire and forget answered %v", types(fs))
	}

	for i := 0; i < maxHeldAcks; i++ {
		if err := ts.feed(pubFrame(uint32(100+i), "dev/sp", "5")); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.feed(pubFrame(99, "dev/sp", "6")); err != nil {
		t.Fatal(err)
	}
	ts.expectAck(99, CodeBusy)
	if got := len(w.dones); got != 3+maxHeldAcks {
		t.Fatalf("%d writes, want %d: the BUSY one was written", got, 3+maxHeldAcks)
	}
	if CodeWriteFailed.Fatal() {
		t.Fatal("WRITE_FAILED must keep the connection")
	}
}
