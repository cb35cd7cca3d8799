package upstream

import (
	"errors"
	"net"
	"testing"

	"github.com/edgemux/edgemux/protocols/modbus/wire"
)

// pipeDevice answers every MBAP read on one end of a net.Pipe with the
// register value v; the other end is the line's Port.
func pipeDevice(t *testing.T, v byte) net.Conn {
	t.Helper()
	port, dev := net.Pipe()
	t.Cleanup(func() { dev.Close() })
	go func() {
		var buf []byte
		chunk := make([]byte, 512)
		for {
			n, err := dev.Read(chunk)
			if err != nil {
				return
			}
			buf = append(buf, chunk[:n]...)
			for {
				tid, unit, _, k, err := wire.ParseMBAP(buf)
				if err != nil || k == 0 {
					break
				}
				buf = buf[k:]
				if _, err := dev.Write(wire.AppendMBAP(nil, tid, unit, []byte{3, 2, 0, v})); err != nil {
					return
				}
			}
		}
	}()
	return port
}

// TestDialInLine: a dial-in line fails requests at once while nothing is
// attached (not demoted for it), speaks MBAP over what is attached, and a
// second attachment replaces and closes the first.
func TestDialInLine(t *testing.T) {
	l, ds := startLine(t, LineConfig{Name: "dtu", Kind: KindDialIn}, DeviceConfig{Name: "plc", Unit: 1, DemoteAfter: 2})
	read := []byte{3, 0, 0, 0, 1}
	for range 4 {
		if r := do(t, ds[0], read); !errors.Is(r.Err, ErrNotConnected) || !errors.Is(r.Err, ErrUnavailable) {
			t.Fatalf("nothing attached: %v", r.Err)
		}
	}
	if h := ds[0].Health(); h.Demoted || h.Connected || !h.DialIn || h.Failed != 4 {
		t.Fatalf("health while away: %+v", h)
	}

	first := pipeDevice(t, 7)
	if replaced, err := l.Attach(first, "10.0.0.1:5000"); replaced || err != nil {
		t.Fatalf("first Attach: %v, %v", replaced, err)
	}
	if r := do(t, ds[0], read); r.Err != nil || r.PDU[3] != 7 {
		t.Fatalf("over the first connection: %x, %v", r.PDU, r.Err)
	}
	second := pipeDevice(t, 8)
	if replaced, err := l.Attach(second, "10.0.0.1:5001"); !replaced || err != nil {
		t.Fatalf("second Attach: %v, %v", replaced, err)
	}
	if r := do(t, ds[0], read); r.Err != nil || r.PDU[3] != 8 {
		t.Fatalf("over the second connection: %x, %v", r.PDU, r.Err)
	}
	if _, err := first.Write([]byte{0}); err == nil {
		t.Fatalf("the replaced connection is still open")
	}
	if h := ds[0].Health(); !h.Connected || h.Peer != "10.0.0.1:5001" || h.Connects != 2 {
		t.Fatalf("health after the replacement: %+v", h)
	}

	l.Detach(first) // already replaced: changes nothing
	if h := ds[0].Health(); !h.Connected {
		t.Fatalf("a stale Detach disconnected the device: %+v", h)
	}
	l.Detach(second)
	if r := do(t, ds[0], read); !errors.Is(r.Err, ErrNotConnected) {
		t.Fatalf("after Detach: %v", r.Err)
	}
	if h := ds[0].Health(); h.Connected {
		t.Fatalf("health after Detach: %+v", h)
	}
}

// TestAttachRefused: only a dial-in line takes a connection; another
// closes it.
func TestAttachRefused(t *testing.T) {
	l, _ := startLine(t, LineConfig{Name: "plc", Kind: KindTCP, Address: "127.0.0.1:1"}, DeviceConfig{Name: "plc", Unit: 1})
	p := pipeDevice(t, 1)
	if _, err := l.Attach(p, "x"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Attach to a tcp line: %v", err)
	}
	if _, err := p.Write([]byte{0}); err == nil {
		t.Fatal("the refused connection is still open")
	}
}
