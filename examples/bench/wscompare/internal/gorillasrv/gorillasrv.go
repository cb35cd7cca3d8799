// Package gorillasrv is the "goroutine per connection" peer of the
// comparison: net/http plus gorilla/websocket, written the way gorilla's
// own chat example writes it (a read pump and a write pump goroutine per
// connection, a buffered send channel, a ping ticker; only its ping
// timings are relaxed, see Config), speaking the
// pubsub JSON protocol on /ws. Writer "mutex" is the leaner variant some
// apps use instead: one goroutine per connection, publishers write under
// a per-connection mutex.
package gorillasrv

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/memstat"
	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/pubsub"
)

// Writer models.
const (
	WriterGoroutine = "goroutine" // chat example: write pump goroutine + send channel
	WriterMutex     = "mutex"     // publisher writes under the connection's mutex
)

// ErrConfig is returned by New for a config it cannot run.
var ErrConfig = errors.New("gorillasrv: invalid config")

// Config of the server; zero fields take the chat example's values.
type Config struct {
	Writer      string        // WriterGoroutine (default) or WriterMutex
	SendQueue   int           // messages buffered per connection (goroutine writer)
	PingPeriod  time.Duration // server ping period (default 30s, as edgemux)
	PongWait    time.Duration // read deadline, extended by each pong and message (default 2m)
	WriteWait   time.Duration // deadline of one write
	BufferSize  int           // gorilla read and write buffer size
	Subprotocol string
}

func (c Config) withDefaults() Config {
	if c.Writer == "" {
		c.Writer = WriterGoroutine
	}
	if c.SendQueue <= 0 {
		c.SendQueue = 256
	}
	// The chat example's 60s/54s leaves a peer 6s to answer a ping; a
	// subscriber that is 6s behind in a 2M-message fan-out on two shared
	// cores misses that and is dropped, and so is the publisher, whose pong
	// waits behind its own publishes. edgemux pings every 30s and drops a
	// peer after two missed pongs: the same slack here.
	if c.PongWait <= 0 {
		c.PongWait = 2 * time.Minute
	}
	if c.PingPeriod <= 0 {
		c.PingPeriod = 30 * time.Second
	}
	if c.WriteWait <= 0 {
		c.WriteWait = 10 * time.Second
	}
	if c.BufferSize <= 0 {
		c.BufferSize = 1024
	}
	if c.Subprotocol == "" {
		c.Subprotocol = "edgemux.v1"
	}
	return c
}

// Server is the gorilla peer.
type Server struct {
	cfg      Config
	upgrader websocket.Upgrader
	hub      *pubsub.Hub[*client]
	dropped  atomic.Uint64
}

// New checks cfg and returns a server; it starts nothing.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.Writer != WriterGoroutine && cfg.Writer != WriterMutex {
		return nil, fmt.Errorf("%w: writer %q", ErrConfig, cfg.Writer)
	}
	s := &Server{cfg: cfg, hub: pubsub.NewHub[*client]()}
	s.upgrader = websocket.Upgrader{
		ReadBufferSize:  cfg.BufferSize,
		WriteBufferSize: cfg.BufferSize,
		Subprotocols:    []string{cfg.Subprotocol},
		CheckOrigin:     func(*http.Request) bool { return true }, // a benchmark on loopback
	}
	return s, nil
}

// Handler serves /ws and /debug/mem.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.serveWS)
	mux.Handle("GET /debug/mem", memstat.Handler())
	return mux
}

// Dropped counts deliveries dropped because a send queue was full.
func (s *Server) Dropped() uint64 { return s.dropped.Load() }

// Subscriptions is the number of (filter, connection) pairs held.
func (s *Server) Subscriptions() int { return s.hub.Len() }

type client struct {
	srv     *Server
	conn    *websocket.Conn
	send    chan []byte   // goroutine writer only
	writeMu sync.Mutex    // mutex writer only
	done    chan struct{} // mutex writer only: closed as the read pump ends
	filters []string      // touched by the read pump only
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	conn, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered with an HTTP error
	}
	c := &client{srv: s, conn: conn}
	if s.cfg.Writer == WriterGoroutine {
		c.send = make(chan []byte, s.cfg.SendQueue)
		go c.writePump()
	} else {
		c.done = make(chan struct{})
		go c.pingLoop()
	}
	c.readPump() // net/http's goroutine for this connection becomes the read pump
}

func (c *client) readPump() {
	cfg := c.srv.cfg
	defer func() {
		c.srv.hub.RemoveAll(c.filters, c)
		// After RemoveAll no publisher can reach c any more, and the
		// read pump itself is the only other sender: closing is safe.
		if c.send != nil {
			close(c.send)
		} else {
			close(c.done)
		}
		c.conn.Close()
	}()
	c.conn.SetReadLimit(pubsub.MaxMessage)
	c.conn.SetReadDeadline(time.Now().Add(cfg.PongWait))
	c.conn.SetPongHandler(func(string) error {
		return c.conn.SetReadDeadline(time.Now().Add(cfg.PongWait))
	})
	for {
		_, msg, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		c.conn.SetReadDeadline(time.Now().Add(cfg.PongWait)) // a talking peer is alive
		if reply := c.srv.hub.Apply(c, &c.filters, msg, nowMillis, deliver); reply != nil {
			deliver(c, reply)
		}
	}
}

func nowMillis() int64 { return time.Now().UnixMilli() }

// deliver runs under the hub's read lock (from Publish) or on c's own read
// pump (a reply): it never blocks on a slow peer longer than WriteWait.
func deliver(c *client, msg []byte) {
	if c.send == nil {
		c.writeMu.Lock()
		defer c.writeMu.Unlock()
		c.conn.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteWait))
		if err := c.conn.WriteMessage(websocket.TextMessage, msg); err != nil {
			c.conn.Close() // the read pump sees the error and cleans up
		}
		return
	}
	select {
	case c.send <- msg:
	default:
		c.srv.dropped.Add(1) // the chat example would drop the client; we drop the message
	}
}

// writePump is the chat example's: one goroutine per connection owns all
// writes, fed by the send channel, and pings on a ticker.
func (c *client) writePump() {
	cfg := c.srv.cfg
	ticker := time.NewTicker(cfg.PingPeriod)
	defer func() {
		ticker.Stop()
		c.conn.Close()
	}()
	for {
		select {
		case msg, ok := <-c.send:
			c.conn.SetWriteDeadline(time.Now().Add(cfg.WriteWait))
			if !ok {
				c.conn.WriteMessage(websocket.CloseMessage, []byte{})
				return
			}
			if err := c.conn.WriteMessage(websocket.TextMessage, msg); err != nil {
				return
			}
		case <-ticker.C:
			c.conn.SetWriteDeadline(time.Now().Add(cfg.WriteWait))
			if err := c.conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				return
			}
		}
	}
}

// pingLoop keeps the mutex-writer connection alive; WriteControl may run
// concurrently with WriteMessage in gorilla.
func (c *client) pingLoop() {
	cfg := c.srv.cfg
	ticker := time.NewTicker(cfg.PingPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-ticker.C:
			if err := c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(cfg.WriteWait)); err != nil {
				c.conn.Close()
				return
			}
		}
	}
}
