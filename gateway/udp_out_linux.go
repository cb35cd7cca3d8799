package gateway

import (
	"errors"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/protocols"
)

// outBatch is how many datagrams a worker queues before it sends them
// with one sendmmsg, unless the call that queued them returns first.
const outBatch = 64

// ErrDatagramSize is what DatagramOut.Send returns for a datagram longer
// than udp.max_datagram (or empty): it is not sent.
var ErrDatagramSize = errors.New("gateway: datagram size outside 1..udp.max_datagram")

// dgramOut is a worker's protocols.DatagramOut: Send copies a datagram
// into an arena and flush sends everything queued with sendmmsg, from one
// of the loops' sockets on the shared port (every worker may write any of
// them: the kernel serialises concurrent sends on a socket). The buffers
// are made at the first Send, so a worker whose handlers never answer
// holds none.
type dgramOut struct {
	g      *Gateway
	fd     int
	family int
	max    int
	arena  []byte
	msgs   []unix.Mmsghdr
	iovs   []unix.Iovec
	names  []unix.RawSockaddrInet6
	n      int    // queued
	wake   func() // the worker's dgramWorker.wakeUp
}

var _ protocols.DatagramOut = (*dgramOut)(nil)

func newDgramOut(g *Gateway, u *udpSocket) *dgramOut {
	return &dgramOut{g: g, fd: u.fd, family: u.family, max: u.max}
}

// Send queues b for peer; it is sent when the handler call that queued it
// returns, or sooner when outBatch datagrams wait. Worker only.
func (o *dgramOut) Send(peer netip.AddrPort, b []byte) error {
	if len(b) == 0 || len(b) > o.max {
		return fmt.Errorf("%w: %d bytes", ErrDatagramSize, len(b))
	}
	if o.msgs == nil {
		o.alloc()
	}
	if o.n == len(o.msgs) || len(o.arena)+len(b) > cap(o.arena) {
		o.flush()
	}
	namelen, err := putRawAddr(&o.names[o.n], o.family, peer)
	if err != nil {
		return err
	}
	off := len(o.arena)
	o.arena = append(o.arena, b...)
	o.iovs[o.n].Base = &o.arena[off]
	o.iovs[o.n].SetLen(len(b))
	h := &o.msgs[o.n].Hdr
	h.Namelen = namelen
	o.n++
	return nil
}

// Wake asks the worker to call its handlers' Woken; any goroutine.
func (o *dgramOut) Wake() {
	if o.wake != nil {
		o.wake()
	}
}

func (o *dgramOut) alloc() {
	o.arena = make([]byte, 0, max(batchBytes, o.max))
	o.msgs = make([]unix.Mmsghdr, outBatch)
	o.iovs = make([]unix.Iovec, outBatch)
	o.names = make([]unix.RawSockaddrInet6, outBatch)
	for i := range o.msgs {
		h := &o.msgs[i].Hdr
		h.Iov = &o.iovs[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&o.names[i]))
	}
}

// flush sends what is queued. A full send buffer (EAGAIN) drops the rest,
// as a full link would; a datagram the kernel refuses is skipped. Both are
// counted. Worker only.
func (o *dgramOut) flush() {
	if o.n == 0 {
		return
	}
	var t udpTally
	for off := 0; off < o.n; {
		k, err := sendmmsg(o.fd, o.msgs[off:o.n], unix.MSG_DONTWAIT)
		switch {
		case err == nil && k > 0:
			t.sent += uint64(k)
			off += k
		case errors.Is(err, unix.EAGAIN):
			t.drops[dropSendFull] += uint64(o.n - off)
			off = o.n
		default:
			t.drops[dropSendError]++
			off++
		}
	}
	o.n = 0
	o.arena = o.arena[:0]
	o.g.udpStats.add(&t)
}

// release drops the buffers: the worker is done.
func (o *dgramOut) release() {
	if o == nil {
		return
	}
	o.n = 0
	o.arena, o.msgs, o.iovs, o.names = nil, nil, nil, nil
}
