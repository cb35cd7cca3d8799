package modbus

import (
	"errors"
	"testing"

	"github.com/edgemux/edgemux/protocols"
	"github.com/edgemux/edgemux/route/bus"
)

// TestDrainAnswersTheRequestInFlight: a master with nothing half received
// is done at once; one whose request is half in gets its answer when the
// rest comes, and the session ends with it.
func TestDrainAnswersTheRequestInFlight(t *testing.T) {
	h := New(plantMap, bus.New(bus.Options{}), nil)
	req := adu(7, 1, 0x03, 0, 0, 0, 1)

	idle, _ := h.Open(&memConn{})
	if _, err := idle.Data(req); err != nil {
		t.Fatal(err)
	}
	if err := idle.(protocols.Drainer).Drain(); !errors.Is(err, protocols.ErrShutdown) {
		t.Fatalf("Drain with nothing in flight = %v, want ErrShutdown", err)
	}

	c := &memConn{}
	busy, _ := h.Open(c)
	if n, err := busy.Data(req[:9]); n != 0 || err != nil {
		t.Fatalf("half a request: consumed %d, %v", n, err)
	}
	if err := busy.(protocols.Drainer).Drain(); err != nil {
		t.Fatalf("Drain with a request in flight = %v, want nil", err)
	}
	n, err := busy.Data(req)
	if n != len(req) || !errors.Is(err, protocols.ErrShutdown) {
		t.Fatalf("the rest: consumed %d, %v; want all and ErrShutdown", n, err)
	}
	if len(c.out) < 9 || c.out[0] != 0 || c.out[1] != 7 {
		t.Fatalf("no answer to the request in flight: % x", c.out)
	}
}
