package upstream

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// baudFlags are the termios speeds a line may use.
var baudFlags = map[int]uint32{
	1200: unix.B1200, 2400: unix.B2400, 4800: unix.B4800, 9600: unix.B9600, 19200: unix.B19200,
	38400: unix.B38400, 57600: unix.B57600, 115200: unix.B115200, 230400: unix.B230400,
}

// BaudSupported reports whether a serial line can run at baud.
func BaudSupported(baud int) bool { _, ok := baudFlags[baud]; return ok }

// openSerial opens a serial device in raw mode at the line's speed and
// framing. It is opened non-blocking through os.OpenFile so Go's poller
// serves its read deadlines: goburrow/serial waits in select(2), whose fd
// set cannot hold a descriptor of 1024 or more, which a gateway holding
// thousands of connections hands out.
func openSerial(cfg LineConfig) (port, error) {
	speed, ok := baudFlags[cfg.Baud]
	if !ok {
		return nil, fmt.Errorf("%w: baud %d not supported", ErrUnavailable, cfg.Baud)
	}
	f, err := os.OpenFile(cfg.Address, os.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	raw, err := f.SyscallConn()
	if err == nil {
		cerr := raw.Control(func(fd uintptr) { err = setRaw(int(fd), speed, cfg) })
		if cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, cfg.Address, err)
	}
	return f, nil
}

// setRaw puts the terminal in raw mode: no echo, no line discipline, no
// flow control, 8 (or the configured) data bits, the parity and stop bits.
func setRaw(fd int, speed uint32, cfg LineConfig) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return os.NewSyscallError("TCGETS", err)
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON | unix.IXOFF | unix.IXANY
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB | unix.PARODD | unix.CSTOPB | unix.CBAUD | unix.CRTSCTS
	t.Cflag |= unix.CREAD | unix.CLOCAL | speed
	switch cfg.DataBits {
	case 7:
		t.Cflag |= unix.CS7
	default:
		t.Cflag |= unix.CS8
	}
	switch cfg.Parity {
	case "E":
		t.Cflag |= unix.PARENB
	case "O":
		t.Cflag |= unix.PARENB | unix.PARODD
	}
	if cfg.StopBits == 2 {
		t.Cflag |= unix.CSTOPB
	}
	t.Ispeed, t.Ospeed = speed, speed
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	return os.NewSyscallError("TCSETS", unix.IoctlSetTermios(fd, unix.TCSETS, t))
}
