//go:build linux

package route

import (
	"encoding/binary"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// eventfdOne is the 8-byte counter increment Wake writes.
var eventfdOne = func() (b [8]byte) {
	binary.NativeEndian.PutUint64(b[:], 1)
	return b
}()

// EventfdParker is the alternative Sleeper: a blocking eventfd. The
// sleeping goroutine blocks its OS thread in read(2) (or ppoll(2) for a
// timed sleep), and Wake is a write(2). It exists to be measured against
// ChanParker (wake_bench_test.go); the runtime must hand the thread's P to
// another thread while it sleeps and get one back when it wakes, which is
// what usually decides the comparison.
type EventfdParker struct {
	fd      int
	readBuf [8]byte        // kept here so Sleep does not allocate
	pollFds [1]unix.PollFd // likewise for ppoll
	ts      unix.Timespec  // likewise
}

// NewEventfdParker opens a blocking, close-on-exec eventfd.
func NewEventfdParker() (*EventfdParker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	e := &EventfdParker{fd: fd}
	e.pollFds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	return e, nil
}

// Sleep implements Sleeper.
func (e *EventfdParker) Sleep(timeout time.Duration) bool {
	if timeout > 0 && !e.waitReadable(timeout) {
		return false
	}
	for {
		_, err := unix.Read(e.fd, e.readBuf[:])
		if err == nil {
			return true
		}
		if !errors.Is(err, unix.EINTR) {
			// EBADF after Close: nothing to wait for any more.
			return false
		}
	}
}

// waitReadable waits up to timeout for the counter to become non-zero,
// retrying with the remaining time when a signal interrupts ppoll.
func (e *EventfdParker) waitReadable(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		e.ts = unix.NsecToTimespec(int64(timeout))
		e.pollFds[0].Revents = 0
		n, err := unix.Ppoll(e.pollFds[:], &e.ts, nil)
		switch {
		case err == nil:
			return n > 0
		case !errors.Is(err, unix.EINTR):
			return false
		}
		if timeout = time.Until(deadline); timeout <= 0 {
			return false
		}
	}
}

// Wake implements Sleeper.
func (e *EventfdParker) Wake() {
	for {
		_, err := unix.Write(e.fd, eventfdOne[:])
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// Close implements Sleeper.
func (e *EventfdParker) Close() error {
	if e.fd < 0 {
		return nil
	}
	err := unix.Close(e.fd)
	e.fd = -1
	if err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}
