package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	goburrow "github.com/goburrow/modbus"

	"github.com/edgemux/edgemux/protocols/modbus/upstream/upstreamtest"
	"github.com/edgemux/edgemux/protocols/private"
)

// TestWriteAnsweredAfterTheDevice: a Modbus master writing the register
// map's tag on a polled writable topic, and a private client's PUB with a
// msg id to it, get their answer only once pymodbus holds the value
// (read from pymodbus right after the answer: the device's `delay` keeps
// its line quiet for a second after each poll, so a write answered when
// it was merely queued is answered before pymodbus has it); a write
// pymodbus refuses (a register it lacks) is exception 0x04 for the
// master and WRITE_FAILED for the private client; a write to a device
// that never answers (a unit id pymodbus does not serve) is exception
// 0x0B and WRITE_FAILED after the device's timeout; a read pipelined
// behind a waiting write is answered after it; once pymodbus is stopped,
// a write is 0x0B and WRITE_FAILED.
func TestWriteAnsweredAfterTheDevice(t *testing.T) {
	dev, stopDevice := upstreamtest.StoppableTCPDevice(t, 1)
	g := mbYAMLGateway(t, fmt.Sprintf(`
modbus:
  unit_ids: [1]
  tags:
    - {topic: plant/sp, table: holding, address: 0, type: int16, scale: 10, writable: true}
    - {topic: plant/far, table: holding, address: 1, type: uint16, writable: true}
    - {topic: plant/gone, table: holding, address: 2, type: uint16, writable: true}
  upstream:
    lines:
      - {name: plc, kind: tcp, address: "%[1]s"}
      - {name: other, kind: tcp, address: "%[1]s"}
    devices:
      - name: plc1
        line: plc
        unit_id: 1
        timeout: 5s
        delay: 1s
        poll:
          interval: 100ms
          tags:
            - {topic: plant/sp, table: holding, address: 10, type: int16, scale: 0.1, writable: true}
            - {topic: plant/far, table: holding, address: 3000, type: uint16, writable: true}
      - name: gone
        line: other
        unit_id: 9
        timeout: 300ms
        poll:
          interval: 1h
          tags:
            - {topic: plant/gone, table: holding, address: 1, type: uint16, writable: true}
`, dev))
	w := mbSubscribe(t, g, "plant/#")
	w.until(t, "the first poll", func(l map[string]mbValue) bool { return l["plant/sp"].V == 101.0 })

	device := mbMaster(t, dev, 1)
	readDevice := func(addr uint16) int16 {
		t.Helper()
		b, err := device.ReadHoldingRegisters(addr, 1)
		if err != nil {
			t.Fatal(err)
		}
		return int16(uint16(b[0])<<8 | uint16(b[1]))
	}
	master := mbMaster(t, g.Addr().String(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), rbIOTimeout)
	defer cancel()
	writer, err := private.Dial(ctx, g.Addr().String(), "writer", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()

	for _, v := range []uint16{55, 66, 77} {
		if _, err := master.WriteSingleRegister(0, v); err != nil {
			t.Fatalf("master's write of %d: %v", v, err)
		}
		if got := readDevice(10); got != int16(v) {
			t.Fatalf("pymodbus holds %d right after the master's write of %d was answered", got, v)
		}
	}
	for _, v := range []int16{-12, 34} {
		if err := writer.Publish("plant/sp", []byte(fmt.Sprint(float64(v)/10)), true); err != nil {
			t.Fatalf("private PUB of %d: %v", v, err)
		}
		if got := readDevice(10); got != v {
			t.Fatalf("pymodbus holds %d right after the private PUB of %d was acknowledged", got, v)
		}
	}

	wantException := func(what string, err error, code byte) {
		t.Helper()
		var me *goburrow.ModbusError
		if !errors.As(err, &me) || me.ExceptionCode != code {
			t.Fatalf("%s: %v, want exception %#02x", what, err, code)
		}
	}
	_, err = master.WriteSingleRegister(1, 5)
	wantException("master's write pymodbus refuses", err, 0x04)
	if err := writer.Publish("plant/far", []byte("5"), true); !errors.Is(err, private.CodeWriteFailed) {
		t.Fatalf("private PUB pymodbus refuses: %v, want WRITE_FAILED", err)
	}
	_, err = master.WriteSingleRegister(2, 5)
	wantException("master's write to a device that does not answer", err, 0x0B)
	if err := writer.Publish("plant/gone", []byte("5"), true); !errors.Is(err, private.CodeWriteFailed) {
		t.Fatalf("private PUB to a device that does not answer: %v, want WRITE_FAILED", err)
	}
	if _, err := master.ReadHoldingRegisters(0, 1); err != nil {
		t.Fatalf("the master's connection after the failures: %v", err)
	}

	// Pipelined: a read behind a write waiting for the device is answered
	// after it, each with its transaction id.
	raw, err := net.Dial("tcp", g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(rbIOTimeout))
	write := []byte{0x01, 0x01, 0, 0, 0, 6, 1, 6, 0, 0, 0, 99}
	read := []byte{0x01, 0x02, 0, 0, 0, 6, 1, 3, 0, 0, 0, 1}
	if _, err := raw.Write(append(write, read...)); err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 12)
	if _, err := io.ReadFull(raw, first); err != nil || !bytes.Equal(first, write) {
		t.Fatalf("first response % x (%v), want the write's echo % x", first, err, write)
	}
	if got := readDevice(10); got != 99 {
		t.Fatalf("pymodbus holds %d right after the pipelined write was answered", got)
	}
	second := make([]byte, 11)
	if _, err := io.ReadFull(raw, second); err != nil || second[0] != 0x01 || second[1] != 0x02 || second[7] != 3 {
		t.Fatalf("second response % x (%v), want the read's, transaction 0x0102", second, err)
	}

	// A device that is gone: its connection closed, new ones refused.
	stopDevice()
	_, err = master.WriteSingleRegister(0, 11)
	wantException("master's write to a stopped device", err, 0x0B)
	if err := writer.Publish("plant/sp", []byte("1.1"), true); !errors.Is(err, private.CodeWriteFailed) {
		t.Fatalf("private PUB to a stopped device: %v, want WRITE_FAILED", err)
	}
}
