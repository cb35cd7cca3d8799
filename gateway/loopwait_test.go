package gateway

import (
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEpollParkLosesNoWake: a loop parked on the runtime's poller wakes
// for every event, whether it arrives before the loop's try, between the
// try and the park, or while it is parked: 3,000 rounds of an eventfd
// written by another goroutine, each wait must return it (the 10 s
// timeout is a lost wake, not a measurement).
func TestEpollParkLosesNoWake(t *testing.T) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	events := make([]unix.EpollEvent, 4)
	p, err := newEpollPark(epfd, events)
	if err != nil {
		unix.Close(epfd)
		t.Fatal(err)
	}
	defer p.close()
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(efd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &ev); err != nil {
		t.Fatal(err)
	}
	if n, err := p.wait(epfd, 1); n != 0 || err != nil {
		t.Fatalf("idle wait: %d events, %v; want 0 after the timeout", n, err)
	}
	one := [8]byte{1}
	raise := func() { unix.Write(efd, one[:]) }
	// Each round raises the event at one of three points: before the
	// wait (its try finds it), in the window between a try that found
	// nothing and the park (testHookPark), or from another goroutine
	// started in that window (mostly while parked).
	var mode int
	testHookPark = func() {
		switch mode {
		case 1:
			raise()
		case 2:
			go raise()
		}
	}
	t.Cleanup(func() { testHookPark = nil })
	for i := range 3000 {
		mode = i % 3
		if mode == 0 {
			raise()
		}
		n, err := p.wait(epfd, 10_000)
		if err != nil || n != 1 || events[0].Fd != int32(efd) {
			t.Fatalf("round %d (mode %d): %d events, %v; want the eventfd's", i, mode, n, err)
		}
		var buf [8]byte
		unix.Read(efd, buf[:])
	}
}

// TestPinnedLoopsServe: with pin_cpus the loops keep the blocking
// epoll_wait (their goroutines are locked to their threads); such a
// gateway still takes connections and answers HELLO.
func TestPinnedLoopsServe(t *testing.T) {
	cfg := rbConfig(t)
	cfg.PinCPUs = true
	g := startGateway(t, cfg, Options{})
	addr := g.Addr().String()
	for i := range 20 {
		c, err := rbHelloConn(addr, netip.Addr{}, fmt.Sprintf("pinned-%d", i))
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.Close()
	}
}
