package gateway

// The receive path alone: the loops' recvmmsg (udpSocket.recv, the
// production function) in batches of 1, 8, 16 and 32, on one and on two
// SO_REUSEPORT sockets, against a plain net.UDPConn.ReadFromUDPAddrPort
// loop (one goroutine per socket), each datagram classified on both sides.
//
// The load generator is another process (this test binary again, see
// TestUDPLoadGenerator) flooding 64-byte datagrams with sendmmsg from 16
// source ports, so the kernel's reuseport hash spreads them over both
// sockets. On this VM one core sends only about 220,000 datagrams a second
// over loopback (the kernel queues each one in the sender's context), far
// fewer than one core receives, so a receiver fed live would sit idle
// between datagrams and receive them one per wakeup, whatever its batch.
// So each round lets the generator fill every socket's buffer (until the
// kernel drops), stops it (SIGSTOP), and times the receiver draining what
// the sockets hold, the generator's core idle: datagrams per second of
// one core receiving, with a queue waiting, which is when batching
// matters. examples/bench/udprecv.sh pins the receiver to one core and
// the generator to the other and prints the ratios:
//
//	taskset -c 0 env EDGEMUX_UDPGEN_CPU=1 go test -run '^$' -bench BenchmarkUDPRecv -benchtime 1000000x ./gateway/
//
// Each run reports dgrams/s (the drains' wall time) and dgrams/cpu-s (the
// receiving process's CPU time during the drains, user + system).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgemux/edgemux/sniff"
)

const (
	benchDatagram = 64 // bytes: a telemetry datagram
	genSockets    = 16 // the generator's source ports
	genBatch      = 64 // datagrams per sendmmsg
	genEnv        = "EDGEMUX_UDPGEN"
	genCPUEnv     = "EDGEMUX_UDPGEN_CPU"
	bufferEnv     = "EDGEMUX_UDPBENCH_BUFFER"
)

// benchBuffer is the SO_RCVBUF asked for on every receiving socket:
// udp.read_buffer's default, or $EDGEMUX_UDPBENCH_BUFFER bytes. It sets
// how many datagrams a round drains (about 1,200 bytes of kernel memory
// each), and so whether they are still in the cache when read.
func benchBuffer() int {
	if n, err := strconv.Atoi(os.Getenv(bufferEnv)); err == nil && n > 0 {
		return n
	}
	return 4 << 20
}

func BenchmarkUDPRecv(b *testing.B) {
	for _, sockets := range []int{1, 2} {
		name := strconv.Itoa(sockets) + "sock"
		b.Run("readfrom/"+name, func(b *testing.B) { benchReadFrom(b, sockets) })
		for _, batch := range []int{1, 8, 16, 32} {
			b.Run("recvmmsg"+strconv.Itoa(batch)+"/"+name, func(b *testing.B) { benchRecvmmsg(b, sockets, batch) })
		}
	}
}

// benchRecvmmsg drains the sockets with the loops' socket code: recv to
// EAGAIN, socket after socket.
func benchRecvmmsg(b *testing.B, sockets, batch int) {
	var socks []*udpSocket
	var fds []int
	addr := netip.MustParseAddrPort("127.0.0.1:0")
	for range sockets {
		u, err := openUDP(addr, udpOptions{batch: batch, maxDatagram: 2048, readBuffer: benchBuffer()})
		if err != nil {
			b.Fatal(err)
		}
		defer u.close()
		if sa, err := unix.Getsockname(u.fd); err == nil {
			addr = addrPort(sa) // the others join its port
		}
		socks = append(socks, u)
		fds = append(fds, u.fd)
	}
	classes := [numClasses]int{}
	got := 0
	benchRounds(b, addr, fds, func() (int, time.Time) {
		for _, u := range socks {
			for {
				k, err := u.recv()
				if err != nil {
					b.Fatal(err)
				}
				if k == 0 {
					break
				}
				for i := range k {
					d, _ := u.datagram(i)
					classes[sniff.ClassifyDatagram(d)]++
				}
				got += k
			}
		}
		return got, time.Now()
	})
	if n := classes[sniff.DatagramRUDP]; n == 0 || n != sum(classes[:]) {
		b.Fatalf("%d of %d datagrams classified as RUDP", n, sum(classes[:]))
	}
}

// benchReadFrom drains the sockets with net.UDPConn, a goroutine per
// socket. A read blocks when its socket is empty, so each goroutine reads
// under a deadline (renewed every 1,024 datagrams, to keep its cost out)
// and the drain ends at its last datagram, not at the deadline.
func benchReadFrom(b *testing.B, sockets int) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return errors.Join(err, serr)
	}}
	addr := "127.0.0.1:0"
	var conns []*net.UDPConn
	var fds []int
	for range sockets {
		pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
		if err != nil {
			b.Fatal(err)
		}
		c := pc.(*net.UDPConn)
		defer c.Close()
		raw, err := c.SyscallConn()
		if err != nil {
			b.Fatal(err)
		}
		raw.Control(func(fd uintptr) {
			fds = append(fds, int(fd))
			setBuffer(int(fd), unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, benchBuffer())
		})
		addr = c.LocalAddr().String()
		conns = append(conns, c)
	}
	var rudp, all int
	var last time.Time // of the last datagram read
	var mu sync.Mutex
	benchRounds(b, netip.MustParseAddrPort(addr), fds, func() (int, time.Time) {
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 2048)
				n, r := 0, 0
				var at time.Time
				for {
					if n%1024 == 0 {
						c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
					}
					k, _, err := c.ReadFromUDPAddrPort(buf)
					if err != nil {
						break // empty: the deadline passed
					}
					if sniff.ClassifyDatagram(buf[:k]) == sniff.DatagramRUDP {
						r++
					}
					n++
					at = time.Now() // 20-40 ns against about 1.5 us a read
				}
				mu.Lock()
				rudp, all = rudp+r, all+n
				if at.After(last) {
					last = at
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return all, last
	})
	if rudp == 0 || rudp != all {
		b.Fatalf("%d of %d datagrams classified as RUDP", rudp, all)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// benchRounds runs the generator against addr and, until drain has taken
// b.N datagrams, lets it fill the sockets fds, stops it, and times drain.
// drain returns the total drained so far and when the round's last
// datagram was read.
func benchRounds(b *testing.B, addr netip.AddrPort, fds []int, drain func() (int, time.Time)) {
	gen := startGenerator(b, addr)
	defer gen.stop()
	b.StopTimer()
	var wall, cpu time.Duration
	got := 0
	for got < b.N {
		gen.fill(b, fds)
		b.StartTimer()
		w0, c0 := time.Now(), processCPU()
		total, end := drain()
		w, c := end.Sub(w0), processCPU()-c0
		b.StopTimer()
		if total == got {
			b.Fatal("a round drained nothing")
		}
		got = total
		wall += w
		cpu += c
	}
	b.ReportMetric(float64(got)/wall.Seconds(), "dgrams/s")
	b.ReportMetric(float64(got)/cpu.Seconds(), "dgrams/cpu-s")
}

// processCPU is the user and system time of the whole process.
func processCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// generator is the load generator's process.
type generator struct{ cmd *exec.Cmd }

// startGenerator runs the load generator against addr, stopped, on CPU
// $EDGEMUX_UDPGEN_CPU when set (through taskset).
func startGenerator(b *testing.B, addr netip.AddrPort) *generator {
	args := []string{os.Args[0], "-test.run=^TestUDPLoadGenerator$", "-test.count=1"}
	if cpu := os.Getenv(genCPUEnv); cpu != "" {
		args = append([]string{"taskset", "-c", cpu}, args...)
	}
	g := &generator{cmd: exec.Command(args[0], args[1:]...)}
	g.cmd.Env = append(os.Environ(), genEnv+"="+addr.String())
	if err := g.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return g
}

// fill lets the generator run until every socket of fds has dropped a
// datagram since (its buffer is full), then stops it and waits until all
// of its threads have stopped.
func (g *generator) fill(b *testing.B, fds []int) {
	before := make([]uint32, len(fds))
	for i, fd := range fds {
		before[i] = socketDrops(b, fd)
	}
	g.cmd.Process.Signal(syscall.SIGCONT)
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < len(fds); {
		if socketDrops(b, fds[i]) != before[i] {
			i++
			continue
		}
		if time.Now().After(deadline) {
			b.Fatalf("socket %d never filled", i)
		}
		time.Sleep(time.Millisecond)
	}
	g.cmd.Process.Signal(syscall.SIGSTOP)
	for !g.stopped(b) {
		time.Sleep(100 * time.Microsecond)
	}
}

// stopped reports whether every thread of the generator is stopped.
func (g *generator) stopped(b *testing.B) bool {
	dir := fmt.Sprintf("/proc/%d/task", g.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		// pid (comm) S ...: the state follows the last ')'.
		s := string(stat)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) == 0 || (f[0] != "T" && f[0] != "t") {
			return false
		}
	}
	return true
}

func (g *generator) stop() {
	g.cmd.Process.Kill()
	g.cmd.Wait()
}

// socketDrops is a socket's kernel drop counter (SO_MEMINFO).
func socketDrops(b *testing.B, fd int) uint32 {
	var info [unix.SK_MEMINFO_VARS]uint32
	size := uint32(unsafe.Sizeof(info))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		b.Fatal(e)
	}
	return info[unix.SK_MEMINFO_DROPS]
}

// TestUDPLoadGenerator is BenchmarkUDPRecv's load generator, not a test:
// with EDGEMUX_UDPGEN=ip:port it floods that address with sendmmsg from
// genSockets sockets until it is killed.
func TestUDPLoadGenerator(t *testing.T) {
	target := os.Getenv(genEnv)
	if target == "" {
		t.Skip("the load generator of BenchmarkUDPRecv")
	}
	to := sockaddr(netip.MustParseAddrPort(target))
	payload := dgFrame(make([]byte, benchDatagram), 1, 1, benchDatagram)
	iov := unix.Iovec{Base: &payload[0]}
	iov.SetLen(len(payload))
	msgs := make([]unix.Mmsghdr, genBatch)
	for i := range msgs {
		msgs[i].Hdr.Iov = &iov
		msgs[i].Hdr.SetIovlen(1)
	}
	var fds []int
	for range genSockets {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Connect(fd, to); err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
	}
	for {
		for _, fd := range fds {
			sendmmsg(fd, msgs, 0) // refused when the receiver has gone: keep going until killed
		}
	}
}
