//go:build !race

package gateway

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sockRead and sockWrite are read(2) and write(2) on a connection's
// socket as raw system calls: the goroutine keeps its P through the call
// instead of telling the scheduler it entered a system call that may
// block. A connection's socket is non-blocking (accept4 with
// SOCK_NONBLOCK), so neither call ever sleeps: it copies, or it returns
// EAGAIN. They can still take a while: on loopback a write runs the
// receiver's TCP input in the same call, tens of microseconds. Announced
// to the scheduler, such a call let sysmon take the P away (handoffp) to
// run the loop or another worker on a fresh thread, and the worker needed
// a P back when the call returned: thread hand-offs, futex wakes and the
// idle thread's netpoll, per request. echocompare, 64 B, old/new binary
// in one run (smoke figures: the machine was shared, load 2.3-7):
// 1000/1000 default placement 25.0/24.8/23.0 -> 21.5/18.4/20.0 us of
// server CPU per request, per request 2.43-2.51 -> 2.05-2.07 system
// calls, 0.28-0.35 -> 0.03-0.05 epoll_waits, 0.27-0.30 -> 0.07-0.10
// context switches (gnet 2.10, 0.014, 0.12); 19000/50 pinned to one
// core 23.1/29.7 -> 14.1/15.1 us (gnet 15.9/11.9), context switches
// 0.25-0.31 -> 0.06-0.11 per request; 19000/50 default placement level
// within the noise (18.8/16.8 -> 17.5/19.1).
//
// What a raw call gives up: a garbage collection's stop-the-world waits
// for it to return (microseconds here), and the race detector does not
// see it (race builds use unix.Read and unix.Write: sysio_race_linux.go).
// Never pass a blocking fd: the thread would sleep holding its P.
func sockRead(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(bufPtr(p)), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func sockWrite(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(bufPtr(p)), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// sockWritev is writev(2) of bufs (none empty) on a connection's socket,
// raw like sockWrite; iov is the caller's scratch.
func sockWritev(fd int, bufs [][]byte, iov *[]unix.Iovec) (int, error) {
	v := (*iov)[:0]
	for _, b := range bufs {
		v = append(v, unix.Iovec{Base: &b[0]})
		v[len(v)-1].SetLen(len(b))
	}
	*iov = v
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(v))), uintptr(len(v)))
	clear(v) // the scratch pins no frame
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// bufPtr is p's first byte, or nil for an empty p.
func bufPtr(p []byte) unsafe.Pointer {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Pointer(&p[0])
}
