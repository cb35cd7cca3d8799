package gateway

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The UDP side of the shared port, at the socket: each loop has its own
// SO_REUSEPORT UDP socket in its epoll set (the kernel spreads peers over
// them by a hash of the 4-tuple) and drains it with recvmmsg batches (seed
// 001: batches of 8..32 cut the per-datagram syscall cost). Workers send
// through the same sockets with sendmmsg. What the loop does with each
// datagram is in udp_loop_linux.go; the worker's side in udp_worker.go.

// udpTruesize is what the kernel charges a socket's receive buffer for a
// small datagram (its sk_buff and the buffer it sits in): about 1 KiB on
// loopback, 2 KiB (half a page) with many NIC drivers, more with some.
// The idle receive step keeps a step's datagrams under a quarter of the
// buffer by this count, under half of it at 4 KiB each.
const udpTruesize = 2048

// maxIOV is the most messages one recvmmsg or sendmmsg call takes: the
// kernel silently caps vlen at UIO_MAXIOV. config.Validate holds udp.batch
// to it as well.
const maxIOV = 1024

// udpOptions are the udp section's socket settings.
type udpOptions struct {
	batch       int // datagrams per recvmmsg call
	maxDatagram int // receive buffer per datagram
	readBuffer  int // SO_RCVBUF asked for; 0 = the kernel's default
	writeBuffer int // SO_SNDBUF asked for; 0 = the kernel's default
	// receiveDelay is udp.receive_delay: after a read, the loop comes
	// back to the socket after this long instead of at its next
	// datagram, while datagrams keep coming (udp_moderate_linux.go).
	receiveDelay time.Duration
	// receiveDelayIdle is udp.receive_delay_idle: the same, while every
	// datagram worker is idle (udp_moderate_linux.go).
	receiveDelayIdle time.Duration
}

// udpSocket is one loop's share of the UDP port and the buffers its
// recvmmsg fills: batch slots of maxDatagram bytes each.
type udpSocket struct {
	fd     int
	family int
	max    int // bytes per slot
	msgs   []unix.Mmsghdr
	iovs   []unix.Iovec
	names  []unix.RawSockaddrInet6 // room for either family's address
	slab   []byte                  // batch x max

	// What the kernel gave for the buffers asked for (getsockopt, which
	// reports twice the usable size: the kernel doubles what it is told).
	rcvbuf, sndbuf int
	// forced says SO_RCVBUFFORCE/SO_SNDBUFFORCE were allowed (root), so
	// net.core.rmem_max and wmem_max did not cap the sizes.
	forced bool

	// Receive moderation, the loop's own (udp_moderate_linux.go): delay
	// is udp.receive_delay (0: off), idleDelay udp.receive_delay_idle;
	// while polled, the socket is out of epoll (EPOLLONESHOT fired) and
	// the loop reads it at pollAt, step (one delay or the other) after
	// the read before. idleBatch is the most datagrams an idle step may
	// gather (a quarter of the receive buffer). polled, idleSteps and
	// cutSteps are atomic for the tests' sake only: the loop alone writes
	// them.
	delay     time.Duration
	idleDelay time.Duration
	idleBatch int
	polled    atomic.Bool
	pollAt    time.Time
	step      time.Duration
	longStep  atomic.Bool   // the scheduled read is a long step ahead (wakeLongSteps reads it)
	idleSteps atomic.Uint64 // polls scheduled idleDelay ahead
	cutSteps  atomic.Uint64 // long steps cut short by a busy worker

	// mu keeps a scrape's getsockopt off an fd that release is closing
	// (a closed number may already name another file).
	mu     sync.RWMutex
	closed bool
}

func openUDP(addr netip.AddrPort, o udpOptions) (*udpSocket, error) {
	family := familyOf(addr)
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, sysErr("socket", err)
	}
	u := &udpSocket{fd: fd, family: family, max: max(1, o.maxDatagram), delay: max(0, o.receiveDelay)}
	fail := func(call string, err error) (*udpSocket, error) {
		unix.Close(fd)
		return nil, sysErr(call, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return fail("setsockopt SO_REUSEPORT", err)
	}
	forcedR, err := setBuffer(fd, unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, o.readBuffer)
	if err != nil {
		return fail("setsockopt SO_RCVBUF", err)
	}
	forcedW, err := setBuffer(fd, unix.SO_SNDBUF, unix.SO_SNDBUFFORCE, o.writeBuffer)
	if err != nil {
		return fail("setsockopt SO_SNDBUF", err)
	}
	u.forced = forcedR || forcedW
	if u.rcvbuf, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil {
		return fail("getsockopt SO_RCVBUF", err)
	}
	if u.sndbuf, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF); err != nil {
		return fail("getsockopt SO_SNDBUF", err)
	}
	if err := unix.Bind(fd, sockaddr(addr)); err != nil {
		return fail("bind udp", err)
	}
	u.buffers(max(1, min(o.batch, maxIOV)))
	u.idleDelay = max(0, o.receiveDelayIdle)
	u.idleBatch = max(1, u.rcvbuf/4/udpTruesize)
	return u, nil
}

// setBuffer asks for a socket buffer of n bytes: with the FORCE option
// first, which only a privileged process may use and which ignores
// net.core.rmem_max/wmem_max, then with the plain one, which the kernel
// caps there. n == 0 leaves the kernel's default. forced reports whether
// the FORCE option was taken.
func setBuffer(fd, opt, force, n int) (forced bool, err error) {
	if n <= 0 {
		return false, nil
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, n) == nil {
		return true, nil
	}
	return false, unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, n)
}

// buffers lays out batch receive slots in one slab.
func (u *udpSocket) buffers(batch int) {
	u.msgs = make([]unix.Mmsghdr, batch)
	u.iovs = make([]unix.Iovec, batch)
	u.names = make([]unix.RawSockaddrInet6, batch)
	u.slab = make([]byte, batch*u.max)
	for i := range batch {
		u.iovs[i].Base = &u.slab[i*u.max]
		u.iovs[i].SetLen(u.max)
		h := &u.msgs[i].Hdr
		h.Iov = &u.iovs[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&u.names[i]))
	}
}

// recv reads one batch without blocking; n == 0 means nothing was waiting.
// Slot i then holds datagram i (datagram, peer) until the next recv.
func (u *udpSocket) recv() (int, error) {
	for i := range u.msgs {
		h := &u.msgs[i].Hdr
		h.Namelen = uint32(unsafe.Sizeof(u.names[i]))
		h.Flags = 0
		u.msgs[i].Len = 0
	}
	for {
		// Raw (the scheduler is not told), as the connections' reads are:
		// MSG_DONTWAIT never sleeps, and announced, each call woke the
		// runtime's sysmon from its idle sleep (see dgramSyscall).
		n, _, e := dgramSyscall(unix.SYS_RECVMMSG, uintptr(u.fd),
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

// datagram is slot i's datagram after recv; truncated says it was longer
// than the slot (MSG_TRUNC): the bytes are only its beginning.
func (u *udpSocket) datagram(i int) (d []byte, truncated bool) {
	m := &u.msgs[i]
	off := i * u.max
	return u.slab[off : off+int(m.Len) : off+u.max], m.Hdr.Flags&unix.MSG_TRUNC != 0
}

// peer is slot i's source address after recv; IPv4 peers of an IPv6
// socket come unmapped (1.2.3.4, not ::ffff:1.2.3.4).
func (u *udpSocket) peer(i int) netip.AddrPort { return rawAddrPort(&u.names[i]) }

// kernelDrops is the socket's drop counter (sk_drops: datagrams the kernel
// discarded, mostly because the receive buffer was full; the drops column
// of /proc/net/udp), read with SO_MEMINFO. ok is false once closed.
func (u *udpSocket) kernelDrops() (n uint32, ok bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	if u.closed {
		return 0, false
	}
	var info [unix.SK_MEMINFO_VARS]uint32
	size := uint32(unsafe.Sizeof(info))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(u.fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return 0, false
	}
	return info[unix.SK_MEMINFO_DROPS], true
}

// close releases the socket; only once no loop or worker uses it.
func (u *udpSocket) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.closed {
		u.closed = true
		unix.Close(u.fd)
	}
}

// sendmmsg sends msgs in one call and returns how many went. The kernel
// reports an error only when the first message fails; a later failure
// ends the batch early, and the next call, starting there, reports it.
// golang.org/x/sys has the Mmsghdr type and the syscall number but no
// wrapper.
func sendmmsg(fd int, msgs []unix.Mmsghdr, flags int) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	for {
		n, _, e := dgramSyscall(unix.SYS_SENDMMSG, uintptr(fd),
			uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), uintptr(flags), 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// dgramSyscall makes the datagram path's socket calls (recvmmsg and
// sendmmsg with MSG_DONTWAIT, the moderated socket's re-arm) as raw
// system calls: the goroutine keeps its P and the scheduler is not told.
// None of them ever sleeps. Announced (unix.Syscall6), a call made after
// the process had been idle woke the runtime's sysmon, which had gone to
// sleep because every P was idle, and sysmon then polled every 20 us for
// a while before it slept again: at 100,000 idle sessions the loops read
// their sockets about 1,000 times a second (receive moderation's 2 ms
// steps), so sysmon ran 400 times a second, 17 % of the server's CPU
// (perf record of the idle row, 25 s / 75 s). What a raw call gives up: a
// garbage collection's stop-the-world waits for it to return
// (microseconds), and sysmon cannot hand the P away mid-call, which a
// call that does not sleep never needs.
var dgramSyscall = unix.RawSyscall6

// rawAddrPort reads a kernel socket address of either family.
func rawAddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), netPort(&sa4.Port))
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), netPort(&sa.Port))
	}
	return netip.AddrPort{}
}

// putRawAddr writes peer into sa as the socket's family wants it (an IPv4
// peer of an IPv6 socket as ::ffff:a.b.c.d) and returns its length.
func putRawAddr(sa *unix.RawSockaddrInet6, family int, peer netip.AddrPort) (uint32, error) {
	a := peer.Addr()
	switch {
	case family == unix.AF_INET && a.Unmap().Is4():
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Unmap().As4()}
		putNetPort(&sa4.Port, peer.Port())
		return unix.SizeofSockaddrInet4, nil
	case family == unix.AF_INET6 && a.IsValid():
		*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16()}
		putNetPort(&sa.Port, peer.Port())
		return unix.SizeofSockaddrInet6, nil
	}
	return 0, errPeerFamily
}

var errPeerFamily = errors.New("gateway: datagram peer not reachable from the UDP socket's address family")

// netPort and putNetPort read and write a port in network byte order,
// whatever the host's.
func netPort(p *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(p))
	return uint16(b[0])<<8 | uint16(b[1])
}

func putNetPort(p *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(port>>8), byte(port)
}
