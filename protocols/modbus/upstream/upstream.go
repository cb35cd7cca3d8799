// Package upstream is edgemux's Modbus master towards the devices: lines
// (a Modbus TCP device, RTU over a serial line, RTU over TCP to a serial
// server) that carry one request at a time, writes ahead of polls, with
// per-device timeouts, retries with backoff, inter-request delays and the
// demotion of a device that keeps failing so it cannot stall its line.
//
// The framing is protocols/modbus/wire; this package is the I/O around it.
// One goroutine per line owns the line's port: callers Submit a request to
// a Device and get its Result through a callback (the gateway's workers,
// which must not block) or wait for it with Do (the poller).
package upstream

import (
	"errors"
	"fmt"
	"time"
)

// Errors a Result carries. A device's exception response is not an
// error: its PDU is the result.
var (
	ErrTimeout     = errors.New("modbus: upstream device did not respond in time")
	ErrUnavailable = errors.New("modbus: upstream path unavailable")
	ErrDemoted     = errors.New("modbus: upstream device demoted after repeated failures")
	ErrQueueFull   = errors.New("modbus: upstream line queue full")
	ErrClosed      = errors.New("modbus: upstream line closed")
	ErrBadRequest  = errors.New("modbus: request cannot go upstream")
	// ErrNotConnected wraps ErrUnavailable: a dial-in device has no
	// connection to the gateway now.
	ErrNotConnected = fmt.Errorf("%w: dial-in device not connected", ErrUnavailable)
)

// Kind is how a line reaches its devices.
type Kind string

// The line kinds.
const (
	KindTCP        Kind = "tcp"          // Modbus TCP (MBAP) to one device or a TCP gateway
	KindRTU        Kind = "rtu"          // RTU frames on a serial device (/dev/ttyUSB0)
	KindRTUOverTCP Kind = "rtu-over-tcp" // RTU frames over TCP to a serial server
	KindDialIn     Kind = "dial-in"      // Modbus TCP (MBAP) over a connection the device opened to the shared port (Attach)
)

// framesMBAP reports whether the line speaks MBAP rather than RTU.
func (k Kind) framesMBAP() bool { return k == KindTCP || k == KindDialIn }

// LineConfig is one line. Zero fields take the defaults noted.
type LineConfig struct {
	Name        string
	Kind        Kind
	Address     string        // host:port for tcp and rtu-over-tcp, a device path for rtu; none for dial-in
	Baud        int           // rtu and rtu-over-tcp: the serial side's speed (default 9600)
	DataBits    int           // 7 or 8 (default 8)
	Parity      string        // N, E or O (default E, the Modbus default)
	StopBits    int           // 1 or 2 (default 1)
	Queue       int           // requests waiting on the line, at most (default 64)
	DialTimeout time.Duration // connecting a TCP line (default 3s)
}

// DeviceConfig is one device on a line. Zero fields take the defaults noted.
type DeviceConfig struct {
	Name         string
	Unit         byte          // the device's unit id; 0 only for broadcast writes
	Timeout      time.Duration // TCP: the response timeout; RTU: the margin over the frames' time on the wire (default 500ms)
	Retries      int           // attempts after the first (default 0); a negative value is none
	Backoff      time.Duration // wait before the first retry, doubled each time (default 50ms)
	Delay        time.Duration // silence on the line after each request to this device (default 0)
	ConnectDelay time.Duration // wait after connecting before the first request (default 0)
	DemoteAfter  int           // failed requests in a row that demote the device (default 3)
	ProbeEvery   time.Duration // a demoted device gets one request this often, the rest fail at once (default 10s)
}

func (c LineConfig) withDefaults() LineConfig {
	if c.Baud == 0 {
		c.Baud = 9600
	}
	if c.DataBits == 0 {
		c.DataBits = 8
	}
	if c.Parity == "" {
		c.Parity = "E"
	}
	if c.StopBits == 0 {
		c.StopBits = 1
	}
	if c.Queue <= 0 {
		c.Queue = 64
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 3 * time.Second
	}
	return c
}

func (c DeviceConfig) withDefaults() DeviceConfig {
	if c.Timeout <= 0 {
		c.Timeout = 500 * time.Millisecond
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.Backoff <= 0 {
		c.Backoff = 50 * time.Millisecond
	}
	if c.DemoteAfter <= 0 {
		c.DemoteAfter = 3
	}
	if c.ProbeEvery <= 0 {
		c.ProbeEvery = 10 * time.Second
	}
	return c
}

// bitsPerChar is the character size on the wire: start, data, parity, stop.
func (c LineConfig) bitsPerChar() int {
	n := 1 + c.DataBits + c.StopBits
	if c.Parity != "N" {
		n++
	}
	return n
}

// Result is the outcome of one request: the response PDU (a normal
// response or the device's exception), or an error. A broadcast write
// succeeds with a nil PDU once sent.
type Result struct {
	PDU []byte
	Err error
	RTT time.Duration // request written to response read, of the last attempt
}
