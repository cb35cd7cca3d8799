package mbsim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/goburrow/modbus"
)

// client is a goburrow/modbus client of device i.
func client(t *testing.T, s *Sim, i int) modbus.Client {
	t.Helper()
	h := modbus.NewTCPClientHandler(s.Addrs()[i].String())
	h.Timeout = 10 * time.Second
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return modbus.NewClient(h)
}

// decode reads tag k of a read of every register from 0.
func decode(data []byte, k int) float64 {
	b := data[2*Tags[k].Address:]
	switch Tags[k].Type {
	case U16:
		return float64(binary.BigEndian.Uint16(b))
	case I16:
		return float64(int16(binary.BigEndian.Uint16(b)))
	case U32:
		return float64(binary.BigEndian.Uint32(b))
	case I32:
		return float64(int32(binary.BigEndian.Uint32(b)))
	case F32:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b))
}

func TestLayout(t *testing.T) {
	if len(Tags) != 30 || Registers != 54 {
		t.Fatalf("%d tags in %d registers, want 30 in 54", len(Tags), Registers)
	}
	seen := map[Type]bool{}
	for _, tag := range Tags {
		seen[tag.Type] = true
	}
	if len(seen) != 6 {
		t.Fatalf("types %v, want all six", seen)
	}
}

// TestGoburrowReads: a goburrow client reads every tag of two devices,
// holding and input registers, and each read has the next generation's
// values, each device its own count.
func TestGoburrowReads(t *testing.T) {
	s, err := Start(Config{Devices: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addrs := s.Addrs()
	if addrs[0].Addr() == addrs[1].Addr() || addrs[1].Addr() == addrs[2].Addr() {
		t.Fatalf("devices share an address: %v", addrs)
	}
	for _, dev := range []int{0, 2} {
		c := client(t, s, dev)
		for gen := uint64(1); gen <= 3; gen++ {
			read := c.ReadHoldingRegisters
			if gen == 2 {
				read = c.ReadInputRegisters
			}
			data, err := read(0, uint16(Registers))
			if err != nil {
				t.Fatal(err)
			}
			for k := range Tags {
				if got, want := decode(data, k), Expected(k, gen); got != want {
					t.Fatalf("device %d read %d tag %d (%s): %v, want %v", dev, gen, k, Tags[k].Type, got, want)
				}
			}
		}
	}
	if s.Reads(0) != 3 || s.Reads(1) != 0 || s.Reads(2) != 3 {
		t.Fatalf("reads %d %d %d, want 3 0 3", s.Reads(0), s.Reads(1), s.Reads(2))
	}
}

// TestExceptions: functions other than 3 and 4 get 01, reads past the
// layout 02, quantities outside 1..125 03; the connection stays open.
func TestExceptions(t *testing.T) {
	s, err := Start(Config{Devices: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := client(t, s, 0)
	check := func(what string, err error, code byte) {
		t.Helper()
		var me *modbus.ModbusError
		if !errors.As(err, &me) || me.ExceptionCode != code {
			t.Fatalf("%s: %v, want exception %d", what, err, code)
		}
	}
	_, err = c.ReadCoils(0, 1)
	check("FC 1", err, 1)
	_, err = c.WriteSingleRegister(0, 1)
	check("FC 6", err, 1)
	_, err = c.ReadHoldingRegisters(uint16(Registers)-1, 2)
	check("past the layout", err, 2)
	// goburrow refuses 126 registers itself: the request goes raw.
	conn, err := net.Dial("tcp", s.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte{0, 7, 0, 0, 0, 6, 1, 3, 0, 0, 0, 126}); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, 9)
	if _, err := io.ReadFull(conn, resp); err != nil || !bytes.Equal(resp, []byte{0, 7, 0, 0, 0, 3, 1, 0x83, 3}) {
		t.Fatalf("126 registers: % x %v, want exception 03", resp, err)
	}
	if _, err := c.ReadHoldingRegisters(uint16(Registers)-1, 1); err != nil {
		t.Fatalf("the last register after exceptions: %v", err)
	}
}

func TestManyDevices(t *testing.T) {
	s, err := Start(Config{Devices: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := s.Addrs()
	if got := a[599].Addr().String(); got != "127.1.2.100" {
		t.Fatalf("device 599 at %s, want 127.1.2.100", got)
	}
	data, err := client(t, s, 599).ReadHoldingRegisters(0, 1)
	if err != nil || len(data) != 2 {
		t.Fatalf("device 599: %v %v", data, err)
	}
}
