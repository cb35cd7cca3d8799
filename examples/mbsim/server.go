package mbsim

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// MaxDevices bounds a simulator: 250 addresses in each of 200 /24s.
const MaxDevices = 50000

// Config says how many devices to run and where.
type Config struct {
	Devices int    // how many, 1..MaxDevices
	Net     string // the first two bytes of the devices' loopback addresses (default "127.1"): device i is NET.(i/250).(1+i%250)
	Port    int    // every device's port (each has its own address, so one port serves them all); 0 = a free port each
}

// Addr is device i's listening address under c (its port not yet chosen if Port is 0).
func (c Config) Addr(i int) string {
	n := c.Net
	if n == "" {
		n = "127.1"
	}
	return fmt.Sprintf("%s.%d.%d:%d", n, i/250, 1+i%250, c.Port)
}

// Sim is a running simulator.
type Sim struct {
	devices []*device
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
	closed  bool
}

// device is one simulated device: its listener and its read count, which
// is the generation of the values it serves (every read sees new values).
type device struct {
	ln    net.Listener
	reads atomic.Uint64
}

// Start listens for every device and serves them until Close. A device
// serves any number of connections, each on a goroutine of its own.
func Start(c Config) (*Sim, error) {
	if c.Devices < 1 || c.Devices > MaxDevices {
		return nil, fmt.Errorf("mbsim: %d devices, want 1..%d", c.Devices, MaxDevices)
	}
	s := &Sim{conns: map[net.Conn]bool{}}
	for i := range c.Devices {
		ln, err := net.Listen("tcp", c.Addr(i))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("mbsim: device %d: %w", i, err)
		}
		d := &device{ln: ln}
		s.devices = append(s.devices, d)
		s.wg.Add(1)
		go s.accept(d)
	}
	return s, nil
}

// Addrs lists the devices' addresses, in device order.
func (s *Sim) Addrs() []netip.AddrPort {
	out := make([]netip.AddrPort, len(s.devices))
	for i, d := range s.devices {
		out[i] = d.ln.Addr().(*net.TCPAddr).AddrPort()
	}
	return out
}

// Reads is how many reads device i has answered.
func (s *Sim) Reads(i int) uint64 { return s.devices[i].reads.Load() }

// Close stops every listener and connection and waits for their goroutines.
func (s *Sim) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	for _, d := range s.devices {
		d.ln.Close()
	}
	s.wg.Wait()
}

func (s *Sim) accept(d *device) {
	defer s.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(d, c)
	}
}

// serve answers one connection's requests in order until it closes or
// sends a header that is not Modbus TCP.
func (s *Sim) serve(d *device, c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReaderSize(c, 1024)
	w := bufio.NewWriterSize(c, 1024)
	var req [260]byte
	regs := make([]byte, 2*Registers)
	out := make([]byte, 0, 260)
	for {
		if _, err := io.ReadFull(r, req[:7]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(req[4:]))
		if binary.BigEndian.Uint16(req[2:]) != 0 || n < 2 || n > 254 {
			return // not Modbus TCP: no exception can be framed for it
		}
		if _, err := io.ReadFull(r, req[7:6+n]); err != nil {
			return
		}
		out = append(out[:0], req[:7]...)
		out = d.answer(out, req[7:6+n], regs)
		binary.BigEndian.PutUint16(out[4:], uint16(len(out)-6))
		if _, err := w.Write(out); err != nil {
			return
		}
		// Pipelined requests are answered in one write.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// Exception codes (Modbus Application Protocol §7).
const (
	exIllegalFunction = 0x01
	exIllegalAddress  = 0x02
	exIllegalValue    = 0x03
)

// answer appends the response PDU to pdu: registers for FC 3 and 4 (both
// tables hold the same values), an exception for anything else.
func (d *device) answer(out, pdu, regs []byte) []byte {
	fc := pdu[0]
	if fc != 3 && fc != 4 {
		return append(out, fc|0x80, exIllegalFunction)
	}
	if len(pdu) != 5 {
		return append(out, fc|0x80, exIllegalValue)
	}
	start, qty := int(binary.BigEndian.Uint16(pdu[1:])), int(binary.BigEndian.Uint16(pdu[3:]))
	switch {
	case qty < 1 || qty > 125:
		return append(out, fc|0x80, exIllegalValue)
	case start+qty > Registers:
		return append(out, fc|0x80, exIllegalAddress)
	}
	Fill(regs, d.reads.Add(1))
	out = append(out, fc, byte(2*qty))
	return append(out, regs[2*start:2*(start+qty)]...)
}
