package upstream

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/edgemux/edgemux/protocols/modbus/wire"
)

// fakeDevice is a device of ours for the cases a real one will not act
// out on demand (a late answer, a damaged frame): a TCP server that reads
// requests (MBAP, or 8-byte RTU requests for FC 1-6) and lets the test
// answer each with whatever bytes it likes, in any order.
type fakeDevice struct {
	addr string
	rtu  bool
	reqs chan fakeRequest
	mu   sync.Mutex
	conn net.Conn
}

type fakeRequest struct {
	tid  uint16
	unit byte
	pdu  []byte
}

func newFakeDevice(t *testing.T, rtu bool) *fakeDevice {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDevice{addr: l.Addr().String(), rtu: rtu, reqs: make(chan fakeRequest, 64)}
	t.Cleanup(func() {
		l.Close()
		f.mu.Lock()
		if f.conn != nil {
			f.conn.Close()
		}
		f.mu.Unlock()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conn = c
			f.mu.Unlock()
			f.read(c)
		}
	}()
	return f
}

func (f *fakeDevice) read(c net.Conn) {
	for {
		var r fakeRequest
		if f.rtu {
			var b [8]byte
			if _, err := io.ReadFull(c, b[:]); err != nil {
				return
			}
			r = fakeRequest{unit: b[0], pdu: append([]byte(nil), b[1:6]...)}
		} else {
			var h [7]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				return
			}
			pdu := make([]byte, int(binary.BigEndian.Uint16(h[4:]))-1)
			if _, err := io.ReadFull(c, pdu); err != nil {
				return
			}
			r = fakeRequest{tid: binary.BigEndian.Uint16(h[:]), unit: h[6], pdu: pdu}
		}
		f.reqs <- r
	}
}

// answer writes the response PDU to r in the device's framing.
func (f *fakeDevice) answer(t *testing.T, r fakeRequest, pdu []byte) {
	t.Helper()
	var frame []byte
	if f.rtu {
		frame = wire.AppendRTU(nil, r.unit, pdu)
	} else {
		frame = wire.AppendMBAP(nil, r.tid, r.unit, pdu)
	}
	f.send(t, frame)
}

func (f *fakeDevice) send(t *testing.T, frame []byte) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.conn.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// registers is a read response PDU of the given register values.
func registers(fc byte, vals ...uint16) []byte {
	p := []byte{fc, byte(2 * len(vals))}
	for _, v := range vals {
		p = binary.BigEndian.AppendUint16(p, v)
	}
	return p
}

// readReq is a read request PDU.
func readReq(fc byte, addr, qty uint16) []byte {
	p := []byte{fc}
	p = binary.BigEndian.AppendUint16(p, addr)
	return binary.BigEndian.AppendUint16(p, qty)
}
