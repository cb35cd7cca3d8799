package gateway

import (
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// errAgain is what a non-blocking socket says when it has nothing more.
var errAgain = unix.EAGAIN

// readFD reads once, retrying EINTR. n == 0 with a nil error is EOF.
func readFD(fd int, p []byte) (int, error) {
	for {
		n, err := unix.Read(fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

// writeFD writes what the socket takes now, retrying EINTR; it returns
// errAgain with n < len(p) when the socket buffer is full.
func writeFD(fd int, p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Write(fd, p[done:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// peekFD looks at the socket's pending bytes without consuming them.
func peekFD(fd int, p []byte) (int, error) {
	for {
		n, _, err := unix.Recvfrom(fd, p, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

// fileConn dups fd into a net.Conn on the Go runtime's poller. The
// returned *os.File still owns fd: the caller must close fd through it
// (an os.File closes its fd when collected, so a plain close(fd) would
// later close whatever reused the number).
func fileConn(fd int) (net.Conn, *os.File, error) {
	f := os.NewFile(uintptr(fd), "edgemux-"+strconv.Itoa(fd))
	c, err := net.FileConn(f)
	return c, f, err
}

// rlimitNoFile is the soft limit on open files.
func rlimitNoFile() int {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<22 {
		return 1 << 16
	}
	return int(r.Cur)
}

// pinToCPU pins the calling OS thread to one CPU (round robin over the
// CPUs this process may use). Errors are ignored: pinning is an
// optimisation, not a requirement.
func pinToCPU(i int) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() == 0 {
		return
	}
	n := set.Count()
	want := i % n
	var one unix.CPUSet
	for cpu, k := 0, 0; cpu < 1024; cpu++ {
		if set.IsSet(cpu) {
			if k == want {
				one.Set(cpu)
				unix.SchedSetaffinity(0, &one)
				return
			}
			k++
		}
	}
}
