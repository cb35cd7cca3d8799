// Command udpfloor measures the floor under the rudp idle row of
// udpcompare: what a Go server costs on this machine that does nothing
// with its datagrams but read them every step with recvmmsg, the way the
// gateway's loops read a moderated socket, and answer some of them with
// sendmmsg. No sessions, no rings, no workers: what is left of the
// gateway's idle CPU above this figure is the gateway's own.
//
//	go run ./examples/bench/udpfloor                        # the idle row's traffic, 16 ms step
//	go run ./examples/bench/udpfloor -step 48ms
//	go run ./examples/bench/udpfloor -rate 1 -answer 0      # the wakeups alone
//
// It starts itself twice more, as the server and as the client, so that
// the server's CPU (getrusage of its own process) holds nothing else.
// Loopback only.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	role    = flag.String("role", "", "internal: server | client")
	addr    = flag.String("addr", "127.0.0.1:47999", "server address (loopback)")
	rate    = flag.Int("rate", 3333, "datagrams a second to the server, spread evenly (the idle row at 100,000 sessions, 25 s / 75 s: 3,333 in)")
	answer  = flag.Int("answer", 2, "answer one datagram in this many (0: none; the idle row: one answer per two datagrams in)")
	step    = flag.Duration("step", 16*time.Millisecond, "the server reads every step (udp.receive_delay_idle)")
	loops   = flag.Int("loops", 2, "server sockets (SO_REUSEPORT), one goroutine each (the gateway's loops)")
	sockets = flag.Int("sockets", 16, "client sockets (udpcompare's idle row: 16)")
	warmup  = flag.Duration("warmup", 5*time.Second, "before the window")
	window  = flag.Duration("window", 30*time.Second, "the server's CPU is measured over this")
	size    = flag.Int("size", 40, "datagram bytes (a keepalive: 16-byte header, PING or PADDING, CRC)")
)

// batch is the gateway's udp.batch default: datagrams per recvmmsg.
const batch = 16

func main() {
	flag.Parse()
	switch *role {
	case "server":
		server()
	case "client":
		client()
	default:
		run()
	}
}

// run starts the server and the client as processes of their own and
// waits for the server's line.
func run() {
	self, err := os.Executable()
	check(err)
	srv := exec.Command(self, append([]string{"-role", "server"}, os.Args[1:]...)...)
	srv.Stdout, srv.Stderr = os.Stdout, os.Stderr
	check(srv.Start())
	time.Sleep(300 * time.Millisecond) // bound before the first datagram
	cl := exec.Command(self, append([]string{"-role", "client"}, os.Args[1:]...)...)
	cl.Stderr = os.Stderr
	check(cl.Start())
	err = srv.Wait()
	cl.Process.Kill()
	cl.Wait()
	check(err)
}

// server reads on loops sockets, then prints its CPU over the window.
func server() {
	a, err := net.ResolveUDPAddr("udp4", *addr)
	check(err)
	var got, sent atomic.Int64
	start := time.Now()
	for range *loops {
		go serve(bind(a), start, &got, &sent)
	}
	time.Sleep(*warmup)
	c0, t0, g0, s0 := cpuTime(), time.Now(), got.Load(), sent.Load()
	time.Sleep(*window)
	c1, t1, g1, s1 := cpuTime(), time.Now(), got.Load(), sent.Load()
	secs := t1.Sub(t0).Seconds()
	in, out := float64(g1-g0)/secs, float64(s1-s0)/secs
	busy := (c1 - c0).Seconds() / secs
	perDatagram := "-"
	if in+out > 0 {
		perDatagram = fmt.Sprintf("%.0f", busy/(in+out)*1e9)
	}
	fmt.Printf("udpfloor step %v, %d loops: %.0f datagrams/s in, %.0f out; CPU %.2f %% of a core, %s ns a datagram\n",
		*step, *loops, in, out, 100*busy, perDatagram)
}

// bind opens a non-blocking SO_REUSEPORT socket on a.
func bind(a *net.UDPAddr) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	check(err)
	check(unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1))
	sa := &unix.SockaddrInet4{Port: a.Port}
	copy(sa.Addr[:], a.IP.To4())
	check(unix.Bind(fd, sa))
	return fd
}

// serve wakes at every multiple of step since start (every loop at the
// same instants, as the gateway's do), reads the socket dry in batches
// and answers every answer-th datagram to its sender.
func serve(fd int, start time.Time, got, sent *atomic.Int64) {
	var (
		in, out   [batch]unix.Mmsghdr
		names     [batch]unix.RawSockaddrInet4
		iovs      [batch]unix.Iovec
		replyIov  unix.Iovec
		buf       = make([]byte, batch*2048)
		reply     = make([]byte, 30) // a keepalive's answer: header, ACK, CRC
		seen      int
		nameBytes = uint32(unsafe.Sizeof(names[0]))
	)
	replyIov.Base = &reply[0]
	replyIov.SetLen(len(reply))
	for i := range in {
		iovs[i].Base = &buf[i*2048]
		iovs[i].SetLen(2048)
		in[i].Hdr.Iov, in[i].Hdr.Iovlen = &iovs[i], 1
		in[i].Hdr.Name = (*byte)(unsafe.Pointer(&names[i]))
		out[i].Hdr.Iov, out[i].Hdr.Iovlen = &replyIov, 1
	}
	for k := time.Duration(1); ; k++ {
		time.Sleep(time.Until(start.Add(k * *step)))
		for {
			for i := range in {
				in[i].Hdr.Namelen = nameBytes
			}
			n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&in[0])), batch, unix.MSG_DONTWAIT, 0, 0)
			if e != 0 || n == 0 {
				break // EAGAIN: dry until the next step
			}
			got.Add(int64(n))
			answers := 0
			for i := range int(n) {
				if seen++; *answer > 0 && seen%*answer == 0 {
					out[answers].Hdr.Name = (*byte)(unsafe.Pointer(&names[i]))
					out[answers].Hdr.Namelen = in[i].Hdr.Namelen
					answers++
				}
			}
			if answers > 0 {
				unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&out[0])), uintptr(answers), 0, 0, 0)
				sent.Add(int64(answers))
			}
			if int(n) < batch {
				break // a short read: the socket is dry
			}
		}
	}
}

// client sends rate datagrams a second from sockets sockets, evenly
// spaced, and reads what comes back.
func client() {
	every := time.Duration(float64(time.Second) * float64(*sockets) / float64(*rate))
	start := time.Now()
	for i := range *sockets {
		c, err := net.Dial("udp4", *addr)
		check(err)
		go func() {
			r := make([]byte, 2048)
			for {
				if _, err := c.Read(r); err != nil && !isRefused(err) {
					return
				}
			}
		}()
		go func() {
			b := make([]byte, *size)
			next := start.Add(time.Duration(i) * every / time.Duration(*sockets))
			for {
				time.Sleep(time.Until(next))
				c.Write(b)
				next = next.Add(every)
			}
		}()
	}
	select {}
}

func isRefused(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno) && errno == syscall.ECONNREFUSED
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	check(unix.Getrusage(unix.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "udpfloor:", err)
		os.Exit(1)
	}
}
