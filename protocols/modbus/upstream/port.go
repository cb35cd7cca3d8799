package upstream

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Port is a line's byte stream: a TCP connection (Modbus TCP, or RTU to
// a serial server on the network), a serial device, or a dial-in
// device's connection on the shared port (Line.Attach). Reads and writes
// come from the line's goroutine only; Close may come from any.
type Port interface {
	Write(p []byte) (int, error)
	Read(p []byte) (int, error)
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
	Close() error
}

// port is the package's own name for it.
type port = Port

var (
	_ port = (*net.TCPConn)(nil)
	_ port = (*os.File)(nil)
)

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// dialPort opens the line's port: a TCP connection for tcp and
// rtu-over-tcp, the serial device for rtu.
func dialPort(cfg LineConfig) (port, error) {
	if cfg.Kind == KindRTU {
		return openSerial(cfg)
	}
	c, err := net.DialTimeout("tcp", cfg.Address, cfg.DialTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	tc := c.(*net.TCPConn)
	_ = tc.SetNoDelay(true)
	return tc, nil
}
