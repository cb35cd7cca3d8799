package main

// What every stack provides to the rows: a server that hands the messages
// it receives to a serverApp (and echoes them when asked), and client
// sessions that send messages and hand echoes back.

import (
	"context"
	"net/netip"
	"sync/atomic"
)

// serverApp is the server side's application, the same for every stack.
type serverApp struct {
	rec    *recorder // telemetry: order and latency; nil when not recorded
	echo   bool      // send every message back on its session
	msgs   atomic.Int64
	opened atomic.Int64 // sessions the stack handed the application
	closed atomic.Int64
}

// handle takes one message; it says whether to send it back.
func (a *serverApp) handle(b []byte) bool {
	a.msgs.Add(1)
	if a.rec != nil {
		a.rec.message(b, sinceEpoch())
	}
	return a.echo
}

// sessions is how many sessions are open now, as the stack told the
// application.
func (a *serverApp) sessions() int64 { return a.opened.Load() - a.closed.Load() }

// server is one stack's server, running.
type server interface {
	addr() netip.AddrPort
	close()
}

// dialConfig says which client sessions to open.
type dialConfig struct {
	server netip.AddrPort
	n      int
	// sockets the sessions share, as devices behind one NAT would look
	// to a server, so that 100,000 sessions do not need 100,000 fds;
	// 0: one socket per session.
	sockets int
	// onReply gets what the server sends back on session i (echoes);
	// msg is valid only during the call.
	onReply func(i int, msg []byte)
}

// clients are a stack's open client sessions.
type clients interface {
	// send hands msg to session i's stack: one goroutine per session at
	// a time.
	send(i int, msg []byte) error
	// established is how many sessions finished their handshake.
	established() int
	close()
}

// stack is one implementation of the app.
type stack struct {
	name string
	// serve starts a server on 127.0.0.1. shared says the clients will
	// share sockets (kcp-go's listener must then tell sessions apart by
	// their conversation id as well as their address).
	serve func(app *serverApp, shared bool) (server, error)
	// dial opens the sessions and returns once every one is established
	// or ctx ends (then with as many as made it).
	dial func(ctx context.Context, cfg dialConfig) (clients, error)
}

// stacks are the four columns, in the tables' order.
var stacks = []stack{
	{name: "rudp", serve: serveRUDP, dial: dialRUDP},
	{name: "kcp-fast", serve: serveKCP(kcpFast), dial: dialKCP(kcpFast)},
	{name: "kcp-default", serve: serveKCP(kcpDefault), dial: dialKCP(kcpDefault)},
	{name: "quic", serve: serveQUIC, dial: dialQUIC},
}

func stackNamed(name string) (stack, bool) {
	for _, s := range stacks {
		if s.name == name {
			return s, true
		}
	}
	return stack{}, false
}
