package gateway

import (
	"errors"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/sniff"
)

// The UDP side of the shared port: each loop has its own SO_REUSEPORT UDP
// socket in its epoll set and drains it with recvmmsg batches (seed 001:
// batches of 8..32 cut the per-datagram syscall cost). Datagrams are
// classified (CoAP, the reliable-UDP core, unknown) and counted; the CoAP
// and RUDP handlers that consume them come with their own issues, until
// then classified datagrams are counted and dropped.
const maxDatagram = 2048

type udpSocket struct {
	fd    int
	msgs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	bufs  [][]byte
}

func openUDP(addr netip.AddrPort, batch int) (*udpSocket, error) {
	family := unix.AF_INET
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, sysErr("socket", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		unix.Close(fd)
		return nil, sysErr("setsockopt SO_REUSEPORT", err)
	}
	if err := unix.Bind(fd, sockaddr(addr)); err != nil {
		unix.Close(fd)
		return nil, sysErr("bind udp", err)
	}
	u := &udpSocket{fd: fd}
	batch = max(1, min(batch, 64))
	u.msgs = make([]unix.Mmsghdr, batch)
	u.iovs = make([]unix.Iovec, batch)
	u.names = make([]unix.RawSockaddrInet6, batch)
	u.bufs = make([][]byte, batch)
	for i := range batch {
		u.bufs[i] = make([]byte, maxDatagram)
		u.iovs[i].Base = &u.bufs[i][0]
		u.iovs[i].SetLen(maxDatagram)
		h := &u.msgs[i].Hdr
		h.Iov = &u.iovs[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&u.names[i]))
	}
	return u, nil
}

// recv reads one batch without blocking; n == 0 means nothing was waiting.
func (u *udpSocket) recv() (int, error) {
	for i := range u.msgs {
		u.msgs[i].Hdr.Namelen = uint32(unsafe.Sizeof(u.names[i]))
		u.msgs[i].Len = 0
	}
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(u.fd),
			uintptr(unsafe.Pointer(&u.msgs[0])), uintptr(len(u.msgs)), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		}
		return 0, sysErr("recvmmsg", e)
	}
}

// drainUDP reads the loop's UDP socket to EAGAIN (it is edge-triggered).
func (l *loop) drainUDP() {
	u := l.udp
	for range 64 { // at most 64 batches per wakeup; the rest next round
		n, err := u.recv()
		if err != nil {
			if !errors.Is(err, unix.EBADF) {
				l.g.log.Warn("udp", "loop", l.idx, "err", err)
			}
			return
		}
		if n == 0 {
			return
		}
		for i := range n {
			d := u.bufs[i][:u.msgs[i].Len]
			l.g.metrics.datagrams.WithLabelValues(sniff.ClassifyDatagram(d).String()).Inc()
		}
	}
	l.udpAgain = true
}
