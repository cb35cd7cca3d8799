package gateway

import (
	"context"
	"testing"

	"github.com/edgemux/edgemux/protocols/private"
)

func TestFDTable(t *testing.T) {
	const size = 3*fdPage + 10
	tb := newFDTable(size)
	if tb.size() < size {
		t.Fatalf("covers %d fds, want at least %d", tb.size(), size)
	}
	fds := []int{0, fdPage - 1, fdPage, 3 * fdPage, size - 1}
	for _, fd := range fds {
		if tb.conn(fd) != nil || tb.place(fd) != nil {
			t.Fatalf("fd %d: entry in an empty table", fd)
		}
	}
	tb.setConn(2*fdPage+1, nil)
	tb.setPlace(2*fdPage+1, nil)
	if n := pagesMade(&tb); n != 0 {
		t.Fatalf("clearing an absent entry made %d pages", n)
	}
	want := map[int]*conn{}
	for _, fd := range fds {
		want[fd] = &conn{fd: int32(fd)}
		tb.setConn(fd, want[fd])
	}
	// A placement shares its conn's entry: setting one leaves the other.
	pl := &placement{weight: 3}
	tb.setPlace(fds[1], pl)
	for _, fd := range fds {
		if got := tb.conn(fd); got != want[fd] {
			t.Fatalf("fd %d: got %p, want %p", fd, got, want[fd])
		}
	}
	if tb.place(fds[1]) != pl || tb.place(fds[0]) != nil {
		t.Fatalf("placements: fd %d has %p (want %p), fd %d has %p (want none)", fds[1], tb.place(fds[1]), pl, fds[0], tb.place(fds[0]))
	}
	tb.setPlace(fds[1], nil)
	if tb.place(fds[1]) != nil || tb.conn(fds[1]) != want[fds[1]] {
		t.Fatalf("clearing fd %d's placement left it or lost its conn", fds[1])
	}
	if got := tb.conn(fdPage + 1); got != nil {
		t.Fatalf("fd %d: an entry never set reads %p", fdPage+1, got)
	}
	if n := pagesMade(&tb); n != 3 { // pages 0, 1 and 3; not 2
		t.Fatalf("%d pages made, want 3", n)
	}

	// each visits in fd order, and an entry may clear itself as
	// stopAll's release does.
	var seen []int
	tb.each(func(c *conn) {
		seen = append(seen, int(c.fd))
		tb.setConn(int(c.fd), nil)
	})
	if len(seen) != len(fds) {
		t.Fatalf("each visited %v, want %v", seen, fds)
	}
	for i := range fds {
		if seen[i] != fds[i] {
			t.Fatalf("each visited %v, want %v", seen, fds)
		}
	}
	for _, fd := range fds {
		if tb.conn(fd) != nil {
			t.Fatalf("fd %d still set after each cleared it", fd)
		}
	}
}

// TestIdleWorkersHoldNoPages: a gateway sized for many fds holds no
// table pages while nobody is connected, and a connection makes pages at
// its own worker only.
func TestIdleWorkersHoldNoPages(t *testing.T) {
	g, err := New(testConfig(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range g.workers {
		if n := pagesMade(&w.fds); n != 0 {
			t.Fatalf("worker %d holds %d pages before any connection", w.idx, n)
		}
	}
	done := rbRunGateway(t, g)
	c, err := private.Dial(context.Background(), g.Addr().String(), "pages", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The HELLO was answered, so its worker has the conn. Closing the
	// gateway orders the workers' writes before the reads below; the
	// pages stay after the connection's release.
	g.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	with := 0
	for _, w := range g.workers {
		if pagesMade(&w.fds) > 0 {
			with++
		}
	}
	if with != 1 {
		t.Fatalf("%d workers made conn pages for one connection, want 1", with)
	}
}

func pagesMade(tb *fdTable) int {
	n := 0
	for _, p := range tb.pages {
		if p != nil {
			n++
		}
	}
	return n
}
