package gateway

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errAgain is what a non-blocking socket says when it has nothing more.
var errAgain = unix.EAGAIN

// readFD reads once, retrying EINTR. n == 0 with a nil error is EOF. fd
// must be non-blocking (sockRead, sysio_linux.go).
func readFD(fd int, p []byte) (int, error) {
	for {
		n, err := sockRead(fd, p)
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
// errAgain with n < len(p) when the socket buffer is full. fd must be
// non-blocking (sockWrite, sysio_linux.go).
func writeFD(fd int, p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := sockWrite(fd, p[done:])
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

// maxIovecs is the most buffers one writev takes (IOV_MAX on Linux).
const maxIovecs = 1024

// writevFD writes bufs (at most maxIovecs, none empty) as far as the
// socket takes them in one writev, retrying EINTR; iov is the caller's
// scratch. It returns the bytes written, and errAgain when the socket
// buffer is full.
func writevFD(fd int, bufs [][]byte, iov *[]unix.Iovec) (int, error) {
	for {
		n, err := sockWritev(fd, bufs, iov)
		switch {
		case err == unix.EINTR:
		case err != nil:
			return 0, err // a failed call wrote nothing (unix.Writev says -1)
		default:
			return n, nil
		}
	}
}

// peekFD looks at the socket's pending bytes without consuming them. It
// calls recvfrom itself: unix.Recvfrom allocates a 112-byte address buffer
// per call (it escapes), garbage at every new connection's first look.
func peekFD(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])),
			uintptr(len(p)), unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// acceptAddr is where acceptFD has the kernel write the peer's address: a
// loop's own, so accepting allocates nothing (unix.Accept4 allocates the
// raw address and a Sockaddr for every connection, about 140 bytes of
// garbage each). Large enough for sockaddr_in and sockaddr_in6.
type acceptAddr struct {
	raw unix.RawSockaddrInet6
	len uint32
}

// acceptFD is accept4(lfd) with the peer's address read from a; the new
// socket gets flags (SOCK_NONBLOCK, SOCK_CLOEXEC).
func acceptFD(lfd int, a *acceptAddr, flags int) (int, netip.AddrPort, error) {
	a.len = uint32(unsafe.Sizeof(a.raw))
	fd, _, e := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(&a.raw)),
		uintptr(unsafe.Pointer(&a.len)), uintptr(flags), 0, 0)
	if e != 0 {
		return -1, netip.AddrPort{}, e
	}
	return int(fd), a.addrPort(), nil
}

// addrPort decodes the address accept4 wrote; the port is in network
// byte order.
func (a *acceptAddr) addrPort() netip.AddrPort {
	port := (*[2]byte)(unsafe.Pointer(&a.raw.Port))
	p := uint16(port[0])<<8 | uint16(port[1])
	switch a.raw.Family {
	case unix.AF_INET:
		in4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&a.raw))
		return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), p)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.raw.Addr).Unmap(), p)
	}
	return netip.AddrPort{}
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
