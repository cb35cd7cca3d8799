package upstream

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
	"github.com/edgemux/edgemux/protocols/modbus/wire"
)

func startLine(t *testing.T, cfg LineConfig, devs ...DeviceConfig) (*Line, []*Device) {
	t.Helper()
	l := NewLine(cfg, nil)
	var ds []*Device
	for _, d := range devs {
		ds = append(ds, l.AddDevice(d))
	}
	l.Start()
	t.Cleanup(l.Close)
	return l, ds
}

func do(t *testing.T, d *Device, pdu []byte) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return d.Do(ctx, pdu)
}

// TestStaleMBAPResponse: a device answers the first request after its
// timeout; the retry of the same read is answered in time. The late
// answer (other transaction id, other value) arrives first on the wire and
// must be dropped, never given to the retry. Fails with the transaction
// id check removed from exchangeMBAP.
func TestStaleMBAPResponse(t *testing.T) {
	f := newFakeDevice(t, false)
	_, ds := startLine(t, LineConfig{Name: "tcp", Kind: KindTCP, Address: f.addr},
		DeviceConfig{Name: "plc", Unit: 1, Timeout: 300 * time.Millisecond, Retries: 1, Backoff: time.Millisecond})
	done := make(chan Result, 1)
	ds[0].Submit(readReq(3, 0, 1), func(r Result) { done <- r })
	first := <-f.reqs  // not answered in time
	second := <-f.reqs // the retry: sent only once the first timed out
	if first.tid == second.tid {
		t.Fatalf("retry reused transaction id %d", first.tid)
	}
	f.answer(t, first, registers(3, 111)) // late
	f.answer(t, second, registers(3, 222))
	r := <-done
	if r.Err != nil || !bytes.Equal(r.PDU, registers(3, 222)) {
		t.Fatalf("result % x %v, want the retry's answer (222)", r.PDU, r.Err)
	}
	h := ds[0].Health()
	if h.Stale != 1 || h.Timeouts != 1 || h.OK != 1 || h.Retries != 1 {
		t.Fatalf("health %+v, want 1 stale, 1 timeout, 1 ok, 1 retry", h)
	}
}

// TestStaleRTUResponse: over RTU (to a serial server on TCP) a late
// answer to an earlier read of one register arrives while a read of two
// is awaited: it does not answer that request (byte count) and is skipped.
func TestStaleRTUResponse(t *testing.T) {
	f := newFakeDevice(t, true)
	_, ds := startLine(t, LineConfig{Name: "rtu", Kind: KindRTUOverTCP, Address: f.addr, Baud: 115200},
		DeviceConfig{Name: "meter", Unit: 7, Timeout: 300 * time.Millisecond})
	r1 := do(t, ds[0], readReq(3, 0, 1)) // times out: not answered
	first := <-f.reqs
	if !errors.Is(r1.Err, ErrTimeout) {
		t.Fatalf("first read: %v, want a timeout", r1.Err)
	}
	done := make(chan Result, 1)
	ds[0].Submit(readReq(3, 0, 2), func(r Result) { done <- r })
	second := <-f.reqs
	f.answer(t, first, registers(3, 111))
	f.answer(t, second, registers(3, 222, 333))
	r := <-done
	if r.Err != nil || !bytes.Equal(r.PDU, registers(3, 222, 333)) {
		t.Fatalf("result % x %v, want 222 333", r.PDU, r.Err)
	}
	if h := ds[0].Health(); h.Stale != 1 {
		t.Fatalf("stale %d, want 1", h.Stale)
	}
}

// TestCRCErrorRetried: a damaged RTU frame is retried and counted as a
// CRC error, not as a timeout.
func TestCRCErrorRetried(t *testing.T) {
	f := newFakeDevice(t, true)
	_, ds := startLine(t, LineConfig{Name: "rtu", Kind: KindRTUOverTCP, Address: f.addr, Baud: 115200},
		DeviceConfig{Name: "meter", Unit: 7, Timeout: 5 * time.Second, Retries: 2, Backoff: time.Millisecond})
	done := make(chan Result, 1)
	ds[0].Submit(readReq(4, 10, 1), func(r Result) { done <- r })
	req := <-f.reqs
	bad := wire.AppendRTU(nil, 7, registers(4, 5))
	bad[len(bad)-1] ^= 0x55
	f.send(t, bad)
	f.answer(t, <-f.reqs, registers(4, 6))
	r := <-done
	if r.Err != nil || !bytes.Equal(r.PDU, registers(4, 6)) {
		t.Fatalf("result % x %v", r.PDU, r.Err)
	}
	if h := ds[0].Health(); h.CRCErrors != 1 || h.Timeouts != 0 || h.Retries != 1 || h.OK != 1 {
		t.Fatalf("health %+v, want 1 CRC error, no timeout, 1 retry", h)
	}
	_ = req
}

// TestWritesAheadOfReads: while the line is busy, a write queued after
// two reads goes out before them.
func TestWritesAheadOfReads(t *testing.T) {
	f := newFakeDevice(t, false)
	_, ds := startLine(t, LineConfig{Name: "tcp", Kind: KindTCP, Address: f.addr},
		DeviceConfig{Name: "plc", Unit: 1, Timeout: 10 * time.Second})
	var mu sync.Mutex
	var order []byte
	var wg sync.WaitGroup
	submit := func(pdu []byte) {
		wg.Add(1)
		ds[0].Submit(pdu, func(Result) { mu.Lock(); order = append(order, pdu[0]); mu.Unlock(); wg.Done() })
	}
	submit(readReq(3, 0, 1)) // in flight
	busy := <-f.reqs
	submit(readReq(3, 1, 1))
	submit(readReq(3, 2, 1))
	write := []byte{6, 0, 9, 0, 1}
	submit(write)
	f.answer(t, busy, registers(3, 1))
	for range 3 {
		r := <-f.reqs
		resp := registers(3, 1)
		if r.pdu[0] == 6 {
			resp = r.pdu
		}
		f.answer(t, r, resp)
	}
	wg.Wait()
	if !bytes.Equal(order, []byte{3, 6, 3, 3}) {
		t.Fatalf("order % x, want the write right after the read in flight", order)
	}
}

// TestBroadcast: a write to unit 0 is sent once and not awaited.
func TestBroadcast(t *testing.T) {
	f := newFakeDevice(t, true)
	_, ds := startLine(t, LineConfig{Name: "rtu", Kind: KindRTUOverTCP, Address: f.addr, Baud: 115200},
		DeviceConfig{Name: "all", Unit: 0, Retries: 3})
	write := []byte{6, 0, 1, 0, 42}
	if r := do(t, ds[0], write); r.Err != nil || r.PDU != nil {
		t.Fatalf("broadcast: % x %v", r.PDU, r.Err)
	}
	if got := <-f.reqs; got.unit != 0 || !bytes.Equal(got.pdu, write) {
		t.Fatalf("device got %+v", got)
	}
	if r := do(t, ds[0], readReq(3, 0, 1)); !errors.Is(r.Err, ErrBadRequest) {
		t.Fatalf("broadcast read: %v, want ErrBadRequest", r.Err)
	}
	select {
	case r := <-f.reqs:
		t.Fatalf("a broadcast was sent twice or a read went out: %+v", r)
	default:
	}
}

// TestPymodbusTCP: reads, a write read back and an exception from
// pymodbus over Modbus TCP.
func TestPymodbusTCP(t *testing.T) {
	addr := upstreamtest.TCPDevice(t, 1)
	_, ds := startLine(t, LineConfig{Name: "tcp", Kind: KindTCP, Address: addr},
		DeviceConfig{Name: "py", Unit: 1, Timeout: 5 * time.Second})
	exerciseDevice(t, ds[0])
}

// TestPymodbusRTU: the same over RTU on a socat pty pair.
func TestPymodbusRTU(t *testing.T) {
	path := upstreamtest.RTUDevice(t, 19200, 1)
	_, ds := startLine(t, LineConfig{Name: "rtu", Kind: KindRTU, Address: path, Baud: 19200, Parity: "N"},
		DeviceConfig{Name: "py", Unit: 1, Timeout: 2 * time.Second, ProbeEvery: 50 * time.Millisecond})
	upstreamtest.Wait(t, "the pymodbus RTU device", func() bool { return do(t, ds[0], readReq(3, 0, 1)).Err == nil })
	exerciseDevice(t, ds[0])
}

func exerciseDevice(t *testing.T, d *Device) {
	t.Helper()
	if r := do(t, d, readReq(3, 0, 3)); r.Err != nil || !bytes.Equal(r.PDU, registers(3, 1000, 1001, 1002)) {
		t.Fatalf("read holding: % x %v", r.PDU, r.Err)
	}
	if r := do(t, d, readReq(4, 5, 1)); r.Err != nil || !bytes.Equal(r.PDU, registers(4, 2005)) {
		t.Fatalf("read input: % x %v", r.PDU, r.Err)
	}
	if r := do(t, d, readReq(1, 0, 4)); r.Err != nil || !bytes.Equal(r.PDU, []byte{1, 1, 0x0A}) {
		t.Fatalf("read coils: % x %v", r.PDU, r.Err)
	}
	write := []byte{6, 0, 7, 0x12, 0x34}
	if r := do(t, d, write); r.Err != nil || !bytes.Equal(r.PDU, write) {
		t.Fatalf("write: % x %v", r.PDU, r.Err)
	}
	if r := do(t, d, readReq(3, 7, 1)); r.Err != nil || !bytes.Equal(r.PDU, registers(3, 0x1234)) {
		t.Fatalf("read back: % x %v", r.PDU, r.Err)
	}
	if r := do(t, d, readReq(3, 5000, 1)); r.Err != nil || !bytes.Equal(r.PDU, []byte{0x83, 2}) {
		t.Fatalf("read past the device's registers: % x %v, want exception 02", r.PDU, r.Err)
	}
	if h := d.Health(); h.Exceptions != 1 || h.LastRTT <= 0 {
		t.Fatalf("health %+v", h)
	}
}

// TestDeadDeviceDemoted: three devices on one RTU line, one silent. The
// silent one is demoted after DemoteAfter timeouts; from then on its
// requests fail at once (no line time) while the others answer every one
// of theirs: counted per cycle, not timed.
func TestDeadDeviceDemoted(t *testing.T) {
	path := upstreamtest.RTUDevice(t, 19200, 1, 2)
	_, ds := startLine(t, LineConfig{Name: "rtu", Kind: KindRTU, Address: path, Baud: 19200, Parity: "N"},
		DeviceConfig{Name: "a", Unit: 1, Timeout: time.Second, ProbeEvery: 50 * time.Millisecond},
		DeviceConfig{Name: "b", Unit: 2, Timeout: time.Second},
		DeviceConfig{Name: "dead", Unit: 3, Timeout: 200 * time.Millisecond, Retries: 1, DemoteAfter: 2, ProbeEvery: time.Hour})
	upstreamtest.Wait(t, "the pymodbus RTU device", func() bool { return do(t, ds[0], readReq(3, 0, 1)).Err == nil })
	const cycles = 20
	for c := range cycles {
		for i, d := range ds {
			r := do(t, d, readReq(3, 0, 2))
			if i < 2 && (r.Err != nil || !bytes.Equal(r.PDU, registers(3, 1000, 1001))) {
				t.Fatalf("cycle %d: device %s: % x %v", c, d.Name(), r.PDU, r.Err)
			}
			if i == 2 && r.Err == nil {
				t.Fatalf("cycle %d: the dead device answered", c)
			}
		}
	}
	dead := ds[2].Health()
	if !dead.Demoted || dead.Timeouts != 4 || dead.Refused != cycles-2 || dead.Failed != 2 {
		t.Fatalf("dead device %+v: want demoted after 2 requests of 2 attempts, the other %d refused", dead, cycles-2)
	}
	for _, d := range ds[1:2] {
		if h := d.Health(); h.OK != cycles || h.Timeouts != 0 {
			t.Fatalf("device %s: %+v, want %d answers", d.Name(), h, cycles)
		}
	}
}
