package gateway

import (
	"bytes"
	"errors"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStalledFanOutHoldsNoCopies: 200 subscribers that do not read, their
// sockets' buffers small, are delivered 1 KiB messages that they share.
// What the sockets do not take is kept by reference to the shared
// frames: the heap grows by a few KiB per subscriber (its queue, its
// references), not by a copy of its output. With copies it grew 28 KiB a
// subscriber for 24 KiB of output each; by reference, 3.4 KiB for 52.
func TestStalledFanOutHoldsNoCopies(t *testing.T) {
	const subs, msgs, size = 200, 200, 1024
	var mu sync.Mutex
	kept := map[uint64]int{} // by connection: bytes kept by reference
	testHookKeptFrames = func(conn uint64, refs [][]byte) {
		n := 0
		for _, f := range refs {
			n += len(f)
		}
		mu.Lock()
		kept[conn] = n
		mu.Unlock()
	}
	t.Cleanup(func() { testHookKeptFrames = nil })
	g := startGateway(t, rbConfig(t), Options{})
	addr := g.Addr().String()
	for i := range subs {
		c, err := dialSmallWindow(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := rbWrite(c, rbHelloFrame("stalled"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		if err := rbExpectAck(c, 0); err != nil {
			t.Fatal(err)
		}
		if err := shrinkServerSendBuffer(c); err != nil { // accepted by now
			t.Fatal(err)
		}
		if err := rbWrite(c, rbSubFrame(1, "fan/#")); err != nil {
			t.Fatal(err)
		}
		if err := rbExpectAck(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	before := heapAfterGC()
	pub, err := rbHelloConn(addr, rbAnySource, "publisher")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var burst []byte
	for i := range msgs {
		burst = append(burst, rbPubFrame(0, "fan/x", bytes.Repeat([]byte{byte(i)}, size))...)
	}
	if err := rbWrite(pub, burst); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every subscriber's output to keep frames", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(kept) == subs
	})
	grown := heapAfterGC() - before
	mu.Lock()
	total := 0
	for _, n := range kept {
		total += n
	}
	mu.Unlock()
	perSub := grown / subs
	t.Logf("%d stalled subscribers keep %d bytes of output each on average; the heap grew %d bytes per subscriber", subs, total/subs, perSub)
	if perSub > 16<<10 {
		t.Fatalf("the heap grew %d bytes per stalled subscriber, whose output is %d bytes", perSub, total/subs)
	}
}

// dialSmallWindow connects with a 4 KiB receive buffer, set before the
// connection exists so that the window it offers is that small.
func dialSmallWindow(addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: rbIOTimeout, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	return d.Dial("tcp", addr)
}

// shrinkServerSendBuffer finds the gateway's end of c among this
// process's descriptors and fixes its send buffer at 4 KiB (8 KiB as the
// kernel counts): on loopback it would grow to megabytes, and a stalled
// subscriber's output would all wait in the kernel, none in the gateway.
func shrinkServerSendBuffer(c net.Conn) error {
	client := c.LocalAddr().(*net.TCPAddr)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		peer, err := unix.Getpeername(fd)
		if err != nil {
			continue
		}
		if sa, ok := peer.(*unix.SockaddrInet4); ok && sa.Port == client.Port && net.IP(sa.Addr[:]).Equal(client.IP) {
			return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
		}
	}
	return errors.New("the gateway's end of the connection is not among the descriptors")
}

// heapAfterGC is the live heap after a full collection.
func heapAfterGC() int {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int(ms.HeapAlloc)
}
