package config

import (
	_ "embed"
	"slices"
	"time"
)

// DefaultYAML is the annotated default configuration, the file form of
// Defaults. A test keeps the two equal, so this is safe to print as a
// starting point (`edgemux check` and the docs use it).
//
//go:embed default.yaml
var DefaultYAML []byte

// MaxFileSize caps the configuration Load reads and Parse accepts: a
// config is hand-written, so anything bigger is a mistake (a log file, a
// device node) and is refused rather than read into memory.
const MaxFileSize = 1 << 20

// DefaultGCPercent is the collector's GOGC when limits.gc_percent is 0 and
// the environment sets no GOGC: the heap may grow by half of what survived
// the last collection before the next one, not by all of it (Go's 100).
// A gateway's live heap is small (about 1 MB idle, 2 MB during a fan-out
// to 1,000 subscribers), so most of its heap's peak is the collector's
// slack: at 50 that fan-out's peak RSS is 1.1-1.7 MiB lower (1.44x
// mosquitto's), for CPU per delivery within the run-to-run noise. The
// price: where the gateway allocates, collections come twice as often,
// and at light load one may come that 100 would have put off (1,000 idle
// echo connections held 291-401 B each instead of 106-344; at 19,000 the
// two are level). docs/BENCHMARKS.md, "GOGC 50", has the runs.
const DefaultGCPercent = 50

// DefaultDialTimeout is what Normalize gives a forward route that has no
// dial_timeout.
const DefaultDialTimeout = 2 * time.Second

// The pool every unclassified or misbehaving connection goes to.
const quarantinePool = "quarantine"

// protoNames are the protocols the sniffer reports, as written in
// match.proto and pools.<name>.protocols.
var protoNames = []string{"modbus", "http", "websocket", "coap", "private", "tls", "unknown"}

// datagramClasses are the classes sniff.ClassifyDatagram reports that a
// udp.routes entry may send to a pool (unknown datagrams are dropped).
var datagramClasses = []string{"coap", "rudp"}

// anyProto is the match.proto wildcard.
const anyProto = "*"

// isProto reports whether name is a protocol the sniffer reports.
func isProto(name string) bool { return slices.Contains(protoNames, name) }

// Defaults returns the built-in configuration, already normalized. It is
// the one place defaults live: Parse starts from it, and default.yaml is
// kept equal to it by a test.
func Defaults() Config {
	c := Config{
		Listen: "127.0.0.1:5020",
		Limits: Limits{
			MaxConns:         19000,
			MaxConnsPerIP:    4096,
			MaxSniffing:      4096,
			MaxSniffingPerIP: 256,
			MaxInput:         65536 + 16,
			OutputHighWater:  65536,
			EMFILEPause:      100 * time.Millisecond,
		},
		Sniff: Sniff{
			Budget:       512,
			Deadline:     3 * time.Second,
			TLSBudget:    4096,
			ProbeTimeout: 2 * time.Second,
		},
		Dispatch: Dispatch{Policy: "entropy", Window: 1024, RingSize: 4096, Spin: 8, History: 4096, LendBelow: 50 * time.Microsecond},
		Pools:    defaultPools(),
		Routes: []Route{
			{Match: Match{Proto: "private"}, Action: "handle"},
			{Match: Match{Proto: "websocket"}, Action: "handle"},
			{Match: Match{Proto: "modbus"}, Action: "handle"},
			{Match: Match{Proto: "coap"}, Action: "handle"},
			{Match: Match{Proto: "http"}, Action: "admin"},
			{Match: Match{Proto: anyProto}, Action: "quarantine"},
		},
		Private: Private{
			MaxFrame:    65536,
			MaxTopic:    256,
			MaxSubs:     64,
			Queue:       65536,
			HelloWithin: 10 * time.Second,
		},
		Modbus: Modbus{NoValue: "exception", Upstream: ModbusUpstream{DialIn: ModbusDialIn{
			Probe: ModbusProbe{UnitID: 1, Function: 3, Address: 0, Count: 1}, IdentifyBy: "register", IDFormat: "number", MaxDevices: 64}}},
		WebSocket: WebSocket{
			Path:             "/ws",
			Subprotocol:      "edgemux.v1",
			MaxHeaderBytes:   8192,
			MaxMessage:       65536,
			HighWater:        65536,
			SlowConsumer:     "close",
			PingInterval:     30 * time.Second,
			MissedPongs:      2,
			HandshakeTimeout: 10 * time.Second,
			MaxSubs:          64,
		},
		Quarantine: Quarantine{
			SampleBytes: 64,
			Hold:        2 * time.Second,
			LogRate:     20,
			BanAfter:    20,
			BanWindow:   time.Minute,
			BanFor:      5 * time.Minute,
			MaxTracked:  10000,
		},
		Bus:   Bus{MaxTopics: 100000, TopicQuota: 1000, MaxPayload: 65536, Queue: 65536, QueueBytes: 4 * mib, Drop: "oldest"},
		Admin: defaultAdmin(),
		UDP: UDP{
			Enabled: true, Batch: 16, MaxDatagram: 2048,
			ReadBuffer: 4 * mib, WriteBuffer: mib, Queue: 8,
			ReceiveDelay: 2 * time.Millisecond, ReceiveDelayIdle: 16 * time.Millisecond,
			Routes: map[string]string{"rudp": "private", "coap": "coap"},
		},
		RUDP: RUDP{
			MaxDatagram: 1200, MaxMessage: 64 * kib, Window: 256, SendQueue: 256 * kib, DatagramQueue: 64,
			IdleTimeout: 30 * time.Second, KeepAlive: 10 * time.Second, HandshakeTimeout: 10 * time.Second,
			MaxAckDelay: 2 * time.Millisecond, InitialRTT: 100 * time.Millisecond,
			MinRTO: 200 * time.Millisecond, MaxRTO: 2 * time.Second,
			CookieLifetime: 30 * time.Second, CookieRotation: 2 * time.Minute,
			MaxSessions: 200000, MemoryBudget: 256 * mib, PendingRetries: 256,
		},
		CoAP: defaultCoAP(),
		Log:  Log{Level: "info", Format: "text"},
		// Northbound: no sink, nothing starts.
		DataDir: DefaultDataDir,

		Cluster: defaultCluster(),
	}
	c.Normalize()
	return c
}

// defaultPools is a fresh map on every call: Parse decodes into it.
func defaultPools() map[string]Pool {
	return map[string]Pool{
		"private":      {Workers: 2, IdleTimeout: 5 * time.Minute, Pattern: "steady"},
		"websocket":    {Workers: 2, Pattern: "bursty"}, // no idle timeout: server pings find dead peers
		"modbus":       {Workers: 2, IdleTimeout: 10 * time.Minute, Pattern: "long-period"},
		"coap":         {Workers: 2, IdleTimeout: 5 * time.Minute, Pattern: "bursty"}, // CoAP over TCP and, by udp.routes, over UDP
		quarantinePool: {Workers: 2},
	}
}

// defaultAdmin: health checks come from anywhere (load balancers,
// orchestrators); metrics and everything an operator sees stay on the box
// until the integrator opens them (README, "Access control").
func defaultAdmin() Admin {
	loopback := func() []string { return []string{"127.0.0.0/8", "::1/128"} }
	return Admin{
		Enabled: true, MaxConns: 64, MaxConnsPerIP: 8, IdleTimeout: 5 * time.Second, StageSample: 128,
		Probe:    AccessGroup{Allow: []string{"0.0.0.0/0", "::/0"}},
		Scrape:   AccessGroup{Allow: loopback()},
		Operator: AccessGroup{Allow: loopback()},
	}
}

// Normalize fills in the defaults that depend on other fields, so the
// rest of the gateway reads plain values:
//   - a forward route without dial_timeout gets DefaultDialTimeout;
//   - a handle route without pool gets the pool named after its protocol
//     (not for proto "*": Validate asks for an explicit pool there);
//   - a pool named after a protocol, without protocols, takes that
//     protocol; an empty protocols list becomes nil;
//   - a udp.routes entry routed to "" is removed (a default route
//     is turned off so: YAML's ~ leaves the default in place);
//   - an empty websocket.allowed_origins, modbus.unit_ids or coap.delete
//     list, or an empty udp.routes map, becomes nil.
//
// Parse calls it; it is idempotent. It changes c's routes and pools in
// place, so copies of c that share them see the change.
func (c *Config) Normalize() {
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Action == "forward" && r.DialTimeout == 0 {
			r.DialTimeout = DefaultDialTimeout
		}
		if r.Action == "handle" && r.Pool == "" && isProto(r.Match.Proto) {
			r.Pool = r.Match.Proto
		}
	}
	for name, p := range c.Pools {
		if len(p.Protocols) > 0 {
			continue
		}
		p.Protocols = nil
		if isProto(name) {
			p.Protocols = []string{name}
		}
		c.Pools[name] = p
	}
	if len(c.WebSocket.AllowedOrigins) == 0 {
		c.WebSocket.AllowedOrigins = nil
	}
	if len(c.Modbus.UnitIDs) == 0 {
		c.Modbus.UnitIDs = nil
	}
	for class, pool := range c.UDP.Routes {
		if pool == "" { // routed to "": not routed
			delete(c.UDP.Routes, class)
		}
	}
	if len(c.UDP.Routes) == 0 {
		c.UDP.Routes = nil
	}
	if len(c.CoAP.Delete) == 0 {
		c.CoAP.Delete = nil
	}
	c.normalizeNorth()
}
