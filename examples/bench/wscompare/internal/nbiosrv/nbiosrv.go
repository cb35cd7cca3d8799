// Package nbiosrv is the event-loop peer of the comparison: lesismal/nbio's
// nbhttp Engine and its websocket Upgrader with OnOpen/OnMessage/OnClose
// callbacks, as nbio's own examples set them up, speaking the pubsub JSON
// protocol on /ws. No goroutine is kept per connection: nbio's pollers
// read, its task pool runs the callbacks, and writes are buffered by nbio.
package nbiosrv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"

	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/memstat"
	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/pubsub"
)

// ErrStart wraps a failure to start the engine.
var ErrStart = errors.New("nbiosrv: start failed")

// Config of the server; zero fields take the defaults noted.
type Config struct {
	Addr        string        // host:port to listen on; port 0 picks one
	MaxLoad     int           // connections nbio plans for (default 20000; nbio's own is 10k)
	Keepalive   time.Duration // idle read deadline (default 10m; nbio's 120s would close idle benchmark clients)
	Subprotocol string
}

func (c Config) withDefaults() Config {
	if c.MaxLoad <= 0 {
		c.MaxLoad = 20000
	}
	if c.Keepalive <= 0 {
		c.Keepalive = 10 * time.Minute
	}
	if c.Subprotocol == "" {
		c.Subprotocol = "edgemux.v1"
	}
	return c
}

// Server is the nbio peer.
type Server struct {
	engine *nbhttp.Engine
	hub    *pubsub.Hub[*websocket.Conn]
	addr   net.Addr
}

// session is what nbio keeps for us per connection.
type session struct {
	mu      sync.Mutex // OnMessage and OnClose may run on different goroutines
	filters []string
}

// Start listens on cfg.Addr and serves until Stop.
func Start(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	s := &Server{hub: pubsub.NewHub[*websocket.Conn]()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.upgradeHandler(cfg))
	mux.Handle("GET /debug/mem", memstat.Handler())
	s.engine = nbhttp.NewEngine(nbhttp.Config{
		Network:                 "tcp",
		Addrs:                   []string{cfg.Addr},
		MaxLoad:                 cfg.MaxLoad,
		ReleaseWebsocketPayload: true,
		Handler:                 mux,
		Listen:                  s.listen,
	})
	if err := s.engine.Start(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	return s, nil
}

// listen records the bound address, so that port 0 works.
func (s *Server) listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err == nil {
		s.addr = ln.Addr()
	}
	return ln, err
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Stop closes the listener and every connection.
func (s *Server) Stop() { s.engine.Stop() }

// Subscriptions is the number of (filter, connection) pairs held.
func (s *Server) Subscriptions() int { return s.hub.Len() }

func (s *Server) upgradeHandler(cfg Config) http.HandlerFunc {
	u := websocket.NewUpgrader()
	u.Subprotocols = []string{cfg.Subprotocol}
	u.KeepaliveTime = cfg.Keepalive
	u.CheckOrigin = func(*http.Request) bool { return true } // a benchmark on loopback
	u.OnOpen(func(c *websocket.Conn) { c.SetSession(&session{}) })
	u.OnMessage(s.onMessage)
	u.OnClose(func(c *websocket.Conn, _ error) {
		if ss, ok := c.Session().(*session); ok {
			ss.mu.Lock()
			s.hub.RemoveAll(ss.filters, c)
			ss.filters = nil
			ss.mu.Unlock()
		}
	})
	return func(w http.ResponseWriter, r *http.Request) {
		// On failure Upgrade has answered with an HTTP error already.
		_, _ = u.Upgrade(w, r, nil)
	}
}

func (s *Server) onMessage(c *websocket.Conn, _ websocket.MessageType, data []byte) {
	ss, ok := c.Session().(*session)
	if !ok {
		return
	}
	ss.mu.Lock()
	reply := s.hub.Apply(c, &ss.filters, data, nowMillis, deliver)
	ss.mu.Unlock()
	if reply != nil {
		deliver(c, reply)
	}
}

func nowMillis() int64 { return time.Now().UnixMilli() }

// deliver queues msg on nbio's write path; nbio never blocks a writer.
func deliver(c *websocket.Conn, msg []byte) {
	_ = c.WriteMessage(websocket.TextMessage, msg)
}
