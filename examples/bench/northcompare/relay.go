package main

import (
	"io"
	"net"
	"sync/atomic"
)

// relay forwards TCP to target once open; before that it closes every
// connection at once (the outage).
type relay struct {
	l      net.Listener
	target string
	open   atomic.Bool
}

func newRelay(target string) *relay {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	r := &relay{l: l, target: target}
	go r.serve()
	return r
}

func (r *relay) addr() string { return r.l.Addr().String() }

func (r *relay) serve() {
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		if !r.open.Load() {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}
