package gateway

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSocketReadWrite: readFD and writeFD on a non-blocking stream socket
// pair say what the worker acts on, whichever system call wrapper the
// build uses (raw, or under -race the annotated one): data, EAGAIN on an
// empty socket, a partial write with EAGAIN on a full one, EOF after the
// peer's close, an error (not a signal's death) writing to a closed peer.
func TestSocketReadWrite(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := fds[0], fds[1]
	defer unix.Close(a)
	buf := make([]byte, 64)
	if n, err := readFD(b, buf); n != 0 || !errors.Is(err, errAgain) {
		t.Fatalf("empty socket: read %d, %v; want EAGAIN", n, err)
	}
	if n, err := writeFD(a, []byte("ping")); n != 4 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if n, err := readFD(b, buf); n != 4 || err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("read: %q, %v; want ping", buf[:n], err)
	}
	// Fill the socket: writeFD takes what fits and says EAGAIN.
	big := bytes.Repeat([]byte{'x'}, 8<<20)
	n, err := writeFD(a, big)
	if n <= 0 || n >= len(big) || !errors.Is(err, errAgain) {
		t.Fatalf("write to a full socket: %d of %d, %v; want part and EAGAIN", n, len(big), err)
	}
	got := 0
	for {
		m, err := readFD(b, make([]byte, 64<<10))
		if errors.Is(err, errAgain) {
			break
		}
		if err != nil || m == 0 {
			t.Fatalf("draining: %d, %v", m, err)
		}
		got += m
	}
	if got != n {
		t.Fatalf("read %d bytes of the %d written", got, n)
	}
	unix.Close(b)
	if n, err := readFD(a, buf); n != 0 || err != nil {
		t.Fatalf("after the peer's close: %d, %v; want EOF (0, nil)", n, err)
	}
	if _, err := writeFD(a, []byte("late")); !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("write to a closed peer: %v; want EPIPE or ECONNRESET", err)
	}
}
