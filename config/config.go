// Package config loads, defaults and validates edgemux's YAML configuration.
//
// Parse walks the YAML against Config's shape (schema.go), so every
// misspelt key (with a "did you mean"), value of the wrong kind and key set
// twice is an error with its field path and line, then decodes with
// yaml.v3. Defaults is the one place defaults live; Validate reports every
// problem at once (errors.Join), each with its field path and the line it
// came from; Load reports both kinds together, in file order.
package config

import "time"

// Config is the whole configuration file.
type Config struct {
	Listen     string          `yaml:"listen"`     // host:port for TCP and UDP alike
	Loops      int             `yaml:"loops"`      // epoll loops; 0 = one per core
	PinCPUs    bool            `yaml:"pin_cpus"`   // pin loops and workers to CPUs
	Limits     Limits          `yaml:"limits"`     // admission caps
	Sniff      Sniff           `yaml:"sniff"`      // classification budget and deadline
	Dispatch   Dispatch        `yaml:"dispatch"`   // dispatcher policy and rings
	Pools      map[string]Pool `yaml:"pools"`      // worker pools by protocol name
	Routes     []Route         `yaml:"routes"`     // first match wins
	Private    Private         `yaml:"private"`    // private protocol limits
	Modbus     Modbus          `yaml:"modbus"`     // Modbus TCP server and its register map
	WebSocket  WebSocket       `yaml:"websocket"`  // WebSocket endpoint and JSON pub/sub
	Quarantine Quarantine      `yaml:"quarantine"` // quarantine pool behaviour
	Bus        Bus             `yaml:"bus"`        // topic bus limits
	Admin      Admin           `yaml:"admin"`      // admin HTTP on the shared port and who may use it (admin.go)
	UDP        UDP             `yaml:"udp"`        // datagram side of the port
	RUDP       RUDP            `yaml:"rudp"`       // the reliable UDP core's sessions
	CoAP       CoAP            `yaml:"coap"`       // CoAP server over UDP and TCP (coap.go)
	Log        Log             `yaml:"log"`        // logging
	DataDir    string          `yaml:"data_dir"`   // where state on disk lives: the north sinks' queues (north.go)
	North      North           `yaml:"north"`      // northbound sinks: MQTT brokers (north.go)
	Cluster    Cluster         `yaml:"cluster"`    // the bus across gateways over NATS JetStream (cluster.go)
	Lines      map[string]int  `yaml:"-"`          // field path -> line, filled by Parse
}

// Limits caps connections before and after classification.
type Limits struct {
	MaxConns         int           `yaml:"max_conns"`           // open TCP connections in all
	MaxConnsPerIP    int           `yaml:"max_conns_per_ip"`    // open TCP connections per source IP
	MaxSniffing      int           `yaml:"max_sniffing"`        // connections still being classified
	MaxSniffingPerIP int           `yaml:"max_sniffing_per_ip"` // the same, per source IP
	MaxInput         int           `yaml:"max_input"`           // unconsumed input kept per connection (bytes)
	OutputHighWater  int           `yaml:"output_high_water"`   // buffered output per connection (bytes)
	EMFILEPause      time.Duration `yaml:"emfile_pause"`        // accept pause after fd exhaustion
	MemoryLimit      int           `yaml:"memory_limit"`        // soft limit on the process's Go memory (bytes); 0 = none
	GCPercent        int           `yaml:"gc_percent"`          // the collector's GOGC; 0 = GOGC from the environment, else DefaultGCPercent
}

// Sniff sets how long and how far the classifier may look.
type Sniff struct {
	Budget       int           `yaml:"budget"`        // bytes peeked at most (default 512)
	Deadline     time.Duration `yaml:"deadline"`      // from accept; trickling does not extend it (default 3s)
	TLSBudget    int           `yaml:"tls_budget"`    // bytes peeked for a ClientHello when a route matches on SNI
	Probe        string        `yaml:"probe"`         // pool whose handler probes silent peers; "" = quarantine them
	ProbeTimeout time.Duration `yaml:"probe_timeout"` // how long a probed peer has to answer
}

// Dispatch chooses workers for classified connections.
type Dispatch struct {
	Policy   string `yaml:"policy"`    // inline | roundrobin | entropy | leastconns
	Window   int    `yaml:"window"`    // events per entropy window
	RingSize int    `yaml:"ring_size"` // events per SPSC ring, a power of two
	Spin     int    `yaml:"spin"`      // polls before a worker parks (at most one with GOMAXPROCS 1)
	History  int    `yaml:"history"`   // source addresses whose class is remembered; 0 = none
	// LendBelow: a loop runs a sleeping worker's turn itself while the
	// worker's sampled cost per event is under this; 0s = never.
	LendBelow time.Duration `yaml:"lend_below"`
}

// Pool is a group of workers dedicated to one protocol (or, with Protocols,
// a mixed pool).
type Pool struct {
	Workers     int           `yaml:"workers"`      // goroutines in the pool
	Protocols   []string      `yaml:"protocols"`    // protocols it takes; default: its own name
	IdleTimeout time.Duration `yaml:"idle_timeout"` // close after this long without input; 0 = never
	Pattern     string        `yaml:"pattern"`      // traffic pattern hint: bursty | steady | long-period
}

// Route says what happens to a classified connection. The first route
// whose match fits wins.
type Route struct {
	Match       Match         `yaml:"match"`
	Action      string        `yaml:"action"`       // handle | forward | admin | quarantine
	Pool        string        `yaml:"pool"`         // for handle: the pool (default: the protocol's name)
	Backend     string        `yaml:"backend"`      // for forward: host:port
	DialTimeout time.Duration `yaml:"dial_timeout"` // for forward
}

// Match selects connections by what the sniffer found.
type Match struct {
	Proto  string `yaml:"proto"`  // modbus | http | coap | private | tls | unknown | * (any)
	SNI    string `yaml:"sni"`    // tls only: server name, exact or "*.suffix"
	Source string `yaml:"source"` // CIDR of the peer address; "" = any
}

// Private limits the private binary protocol.
type Private struct {
	MaxFrame    int           `yaml:"max_frame"`    // payload bytes per frame
	MaxTopic    int           `yaml:"max_topic"`    // bytes per topic or filter
	MaxSubs     int           `yaml:"max_subs"`     // subscriptions per connection
	Queue       int           `yaml:"queue"`        // deliveries queued per connection (messages; bus.queue_bytes applies too)
	HelloWithin time.Duration `yaml:"hello_within"` // HELLO must come first, within this long
}

// Modbus configures the Modbus TCP server: the unit ids it answers and
// the register map that shows bus topics to masters.
type Modbus struct {
	UnitIDs []int         `yaml:"unit_ids"` // unit ids answered; empty = any
	MaxAge  time.Duration `yaml:"max_age"`  // a tag value older than this is stale; 0 = values never go stale
	NoValue string        `yaml:"no_value"` // a read of a tag never published or stale: exception (0x0B) | zero
	Tags    []ModbusTag   `yaml:"tags"`     // the register map

	Upstream ModbusUpstream `yaml:"upstream"` // devices edgemux is the master of (mbupstream.go)
}

// ModbusTag is one bus topic seen as Modbus data.
type ModbusTag struct {
	Topic    string  `yaml:"topic"`    // bus topic, no wildcards
	Table    string  `yaml:"table"`    // coil | discrete | input | holding
	Address  int     `yaml:"address"`  // first coil or register, 0-based protocol address
	Type     string  `yaml:"type"`     // bool | uint16 | int16 | uint32 | int32 | float32
	Scale    float64 `yaml:"scale"`    // register = value x scale; 0 = 1
	Writable bool    `yaml:"writable"` // masters may write it (coil, holding); writes are published
}

// WebSocket configures the WebSocket endpoint (HTTP upgrade on the shared
// port) and its JSON pub/sub protocol.
type WebSocket struct {
	Path             string        `yaml:"path"`              // request path that upgrades; others get 404
	Subprotocol      string        `yaml:"subprotocol"`       // Sec-WebSocket-Protocol the server selects
	AllowedOrigins   []string      `yaml:"allowed_origins"`   // empty = same origin only; ["*"] = any
	Compression      bool          `yaml:"compression"`       // negotiate permessage-deflate
	MaxHeaderBytes   int           `yaml:"max_header_bytes"`  // HTTP request header block; larger gets 431
	MaxMessage       int           `yaml:"max_message"`       // message bytes (on the wire and inflated); larger closes 1009
	HighWater        int           `yaml:"high_water"`        // buffered output past which a peer is a slow consumer
	SlowConsumer     string        `yaml:"slow_consumer"`     // close | drop
	PingInterval     time.Duration `yaml:"ping_interval"`     // server ping period
	MissedPongs      int           `yaml:"missed_pongs"`      // unanswered pings before close
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"` // whole HTTP request within this long
	MaxSubs          int           `yaml:"max_subs"`          // subscriptions per connection
}

// Quarantine sets the quarantine pool's sampling and bans.
type Quarantine struct {
	SampleBytes int           `yaml:"sample_bytes"` // hex sample of the first bytes, at most
	Hold        time.Duration `yaml:"hold"`         // how long a silent connection is held before close
	LogRate     int           `yaml:"log_rate"`     // log lines per second at most
	BanAfter    int           `yaml:"ban_after"`    // landings within BanWindow that ban a source
	BanWindow   time.Duration `yaml:"ban_window"`
	BanFor      time.Duration `yaml:"ban_for"`
	MaxTracked  int           `yaml:"max_tracked"` // sources tracked for bans, at most
}

// Bus limits the topic bus.
type Bus struct {
	MaxTopics  int    `yaml:"max_topics"`  // topics in the last-value cache (those the config serves aside); a new one past it is refused
	TopicQuota int    `yaml:"topic_quota"` // new topics one connection may add to the cache
	MaxPayload int    `yaml:"max_payload"` // bytes per message
	Queue      int    `yaml:"queue"`       // messages per subscriber queue
	QueueBytes int    `yaml:"queue_bytes"` // bytes per subscriber queue (topic + payload + 80 per message)
	Drop       string `yaml:"drop"`        // oldest | newest | disconnect, when a queue is full
}

// UDP is the datagram side of the shared port.
type UDP struct {
	Enabled     bool              `yaml:"enabled"`
	Sockets     int               `yaml:"sockets"`      // SO_REUSEPORT sockets; 0 = one per loop
	Batch       int               `yaml:"batch"`        // datagrams per receive call (recvmmsg)
	MaxDatagram int               `yaml:"max_datagram"` // receive buffer per datagram (bytes); longer ones are counted and dropped
	ReadBuffer  int               `yaml:"read_buffer"`  // SO_RCVBUF asked for per socket (bytes); 0 = the kernel's default
	WriteBuffer int               `yaml:"write_buffer"` // SO_SNDBUF asked for per socket (bytes); 0 = the kernel's default
	Queue       int               `yaml:"queue"`        // datagram batches in flight from each loop to each worker
	Routes      map[string]string `yaml:"routes"`       // datagram class (coap | rudp) -> pool; a class with no route is counted and dropped

	// ReceiveDelay: while datagrams keep coming, a loop reads its socket
	// this often rather than at each one (receive moderation); 0 = off.
	ReceiveDelay time.Duration `yaml:"receive_delay"`
	// ReceiveDelayIdle is the step instead while every datagram handler
	// says its sessions are idle (keepalives only); at most ReceiveDelay
	// (or 0) = the same step always.
	ReceiveDelayIdle time.Duration `yaml:"receive_delay_idle"`
}

// RUDP tunes the reliable UDP core (protocols/rudp, README "Configuration"):
// the sessions that carry the private protocol over UDP.
type RUDP struct {
	MaxDatagram      int           `yaml:"max_datagram"`      // UDP payload bytes; messages are fragmented to it
	MaxMessage       int           `yaml:"max_message"`       // largest reliable message (bytes)
	Window           int           `yaml:"window"`            // receive window (fragments)
	SendQueue        int           `yaml:"send_queue"`        // reliable bytes queued per session
	DatagramQueue    int           `yaml:"datagram_queue"`    // unreliable messages queued each way per session
	IdleTimeout      time.Duration `yaml:"idle_timeout"`      // nothing heard for this long: the session is dead
	KeepAlive        time.Duration `yaml:"keepalive"`         // what a quiet client is asked to ping at
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"` // client side: give up a handshake after this long
	MaxAckDelay      time.Duration `yaml:"max_ack_delay"`     // an ACK may wait this long for company
	InitialRTT       time.Duration `yaml:"initial_rtt"`       // RTT assumed before the first sample
	MinRTO           time.Duration `yaml:"min_rto"`
	MaxRTO           time.Duration `yaml:"max_rto"`         // also caps the backoff
	CookieLifetime   time.Duration `yaml:"cookie_lifetime"` // a RETRY cookie is accepted this long
	CookieRotation   time.Duration `yaml:"cookie_rotation"` // the cookie key changes this often
	MaxSessions      int           `yaml:"max_sessions"`    // per worker
	MemoryBudget     int           `yaml:"memory_budget"`   // message buffers of all sessions together (bytes)
	PendingRetries   int           `yaml:"pending_retries"` // stateless replies held per worker
	KeyFile          string        `yaml:"key_file"`        // sealed mode: "device-id <64 hex digits>" per line; "" = plain
}

// Log configures log/slog.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // text | json
}
