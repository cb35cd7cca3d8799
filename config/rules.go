package config

import (
	"math"
	"time"
)

// intRule is the allowed range of one integer field. The bounds are what
// the gateway can honour on a small Linux box, wide enough for any sane
// deployment and narrow enough that a typo (an extra zero or three) is
// caught before it becomes an allocation.
type intRule struct {
	path     string
	min, max int
	get      func(*Config) int
}

const (
	kib = 1 << 10
	mib = 1 << 20

	// minMemoryLimit is the smallest limits.memory_limit other than 0.
	minMemoryLimit = 32 * mib
	// maxMemoryLimit is the largest limits.memory_limit: 1 TiB, or as much
	// as an int holds on a 32-bit box (2 GiB - 1, more than its address
	// space leaves the Go heap anyway).
	maxMemoryLimit = min(1<<40, math.MaxInt)
	// minGCPercent is the smallest limits.gc_percent other than 0: below
	// it the collector runs about as often as the heap grows by a tenth.
	minGCPercent = 10
)

var intRules = [...]intRule{
	{"loops", 0, 256, func(c *Config) int { return c.Loops }},
	{"limits.max_conns", 1, 1000000, func(c *Config) int { return c.Limits.MaxConns }},
	{"limits.max_conns_per_ip", 1, 1000000, func(c *Config) int { return c.Limits.MaxConnsPerIP }},
	{"limits.max_sniffing", 1, 1000000, func(c *Config) int { return c.Limits.MaxSniffing }},
	{"limits.max_sniffing_per_ip", 1, 1000000, func(c *Config) int { return c.Limits.MaxSniffingPerIP }},
	{"limits.max_input", 64, 64 * mib, func(c *Config) int { return c.Limits.MaxInput }},
	{"limits.output_high_water", kib, 64 * mib, func(c *Config) int { return c.Limits.OutputHighWater }},
	{"limits.memory_limit", 0, maxMemoryLimit, func(c *Config) int { return c.Limits.MemoryLimit }}, // 0, or at least minMemoryLimit (checkCrossFields)
	{"limits.gc_percent", 0, 1000, func(c *Config) int { return c.Limits.GCPercent }},               // 0, or at least minGCPercent (checkCrossFields)
	{"sniff.budget", 16, 64 * kib, func(c *Config) int { return c.Sniff.Budget }},
	{"sniff.tls_budget", 16, 64 * kib, func(c *Config) int { return c.Sniff.TLSBudget }},
	{"dispatch.window", 16, mib, func(c *Config) int { return c.Dispatch.Window }},
	{"dispatch.spin", 0, 100000, func(c *Config) int { return c.Dispatch.Spin }},
	{"admin.stage_sample", 0, mib, func(c *Config) int { return c.Admin.StageSample }},
	{"dispatch.history", 0, 1 << 20, func(c *Config) int { return c.Dispatch.History }},
	{"private.max_frame", 16, 16 * mib, func(c *Config) int { return c.Private.MaxFrame }},
	{"private.max_topic", 1, 65535, func(c *Config) int { return c.Private.MaxTopic }},
	{"private.max_subs", 1, 65536, func(c *Config) int { return c.Private.MaxSubs }},
	{"private.queue", 1, mib, func(c *Config) int { return c.Private.Queue }},
	{"websocket.max_header_bytes", 256, 64 * kib, func(c *Config) int { return c.WebSocket.MaxHeaderBytes }}, // the gateway peeks at most 64 KiB
	{"websocket.max_message", 16, 16 * mib, func(c *Config) int { return c.WebSocket.MaxMessage }},
	{"websocket.high_water", kib, 64 * mib, func(c *Config) int { return c.WebSocket.HighWater }},
	{"websocket.missed_pongs", 1, 100, func(c *Config) int { return c.WebSocket.MissedPongs }},
	{"websocket.max_subs", 1, 65536, func(c *Config) int { return c.WebSocket.MaxSubs }},
	{"quarantine.sample_bytes", 1, 4096, func(c *Config) int { return c.Quarantine.SampleBytes }},
	{"quarantine.log_rate", 1, 10000, func(c *Config) int { return c.Quarantine.LogRate }},
	{"quarantine.ban_after", 1, 1000000, func(c *Config) int { return c.Quarantine.BanAfter }},
	{"quarantine.max_tracked", 1, mib, func(c *Config) int { return c.Quarantine.MaxTracked }},
	{"bus.max_topics", 1, 10000000, func(c *Config) int { return c.Bus.MaxTopics }},
	{"bus.max_payload", 1, 16 * mib, func(c *Config) int { return c.Bus.MaxPayload }},
	{"bus.topic_quota", 1, 10000000, func(c *Config) int { return c.Bus.TopicQuota }}, // at most bus.max_topics (checkCrossFields)
	{"bus.queue", 1, mib, func(c *Config) int { return c.Bus.Queue }},
	{"bus.queue_bytes", 64 * kib, 1 << 30, func(c *Config) int { return c.Bus.QueueBytes }},
	{"admin.max_conns", 1, 10000, func(c *Config) int { return c.Admin.MaxConns }},
	{"admin.max_conns_per_ip", 1, 10000, func(c *Config) int { return c.Admin.MaxConnsPerIP }},
	{"udp.sockets", 0, 256, func(c *Config) int { return c.UDP.Sockets }},
	{"udp.batch", 1, 1024, func(c *Config) int { return c.UDP.Batch }}, // recvmmsg takes at most UIO_MAXIOV
	{"udp.max_datagram", 64, 65535, func(c *Config) int { return c.UDP.MaxDatagram }},
	{"udp.read_buffer", 0, 1 << 30, func(c *Config) int { return c.UDP.ReadBuffer }},   // 0, or at least minSocketBuffer (checkUDP)
	{"udp.write_buffer", 0, 1 << 30, func(c *Config) int { return c.UDP.WriteBuffer }}, // 0, or at least minSocketBuffer (checkUDP)
	{"udp.queue", 1, 1024, func(c *Config) int { return c.UDP.Queue }},
	{"rudp.max_datagram", 256, 65000, func(c *Config) int { return c.RUDP.MaxDatagram }}, // at most udp.max_datagram (checkRUDP)
	{"rudp.max_message", 1, 16 * mib, func(c *Config) int { return c.RUDP.MaxMessage }},  // at most half the window of fragments (checkRUDP)
	{"rudp.window", 4, 32768, func(c *Config) int { return c.RUDP.Window }},
	{"rudp.send_queue", kib, 1 << 30, func(c *Config) int { return c.RUDP.SendQueue }}, // at least max_message (checkRUDP)
	{"rudp.datagram_queue", 1, 65536, func(c *Config) int { return c.RUDP.DatagramQueue }},
	{"rudp.max_sessions", 1, 10000000, func(c *Config) int { return c.RUDP.MaxSessions }},
	{"rudp.memory_budget", mib, maxMemoryLimit, func(c *Config) int { return c.RUDP.MemoryBudget }},
	{"rudp.pending_retries", 1, 65536, func(c *Config) int { return c.RUDP.PendingRetries }},
}

// durationRule is the allowed range of one duration field.
type durationRule struct {
	path     string
	min, max time.Duration
	get      func(*Config) time.Duration
}

var durationRules = [...]durationRule{
	{"limits.emfile_pause", time.Millisecond, 10 * time.Second, func(c *Config) time.Duration { return c.Limits.EMFILEPause }},
	{"dispatch.lend_below", 0, 10 * time.Millisecond, func(c *Config) time.Duration { return c.Dispatch.LendBelow }},
	{"udp.receive_delay", 0, 50 * time.Millisecond, func(c *Config) time.Duration { return c.UDP.ReceiveDelay }},
	{"udp.receive_delay_idle", 0, 50 * time.Millisecond, func(c *Config) time.Duration { return c.UDP.ReceiveDelayIdle }},
	{"sniff.deadline", 100 * time.Millisecond, 5 * time.Minute, func(c *Config) time.Duration { return c.Sniff.Deadline }},
	{"sniff.probe_timeout", 100 * time.Millisecond, 5 * time.Minute, func(c *Config) time.Duration { return c.Sniff.ProbeTimeout }},
	{"private.hello_within", 100 * time.Millisecond, 5 * time.Minute, func(c *Config) time.Duration { return c.Private.HelloWithin }},
	{"websocket.ping_interval", time.Second, time.Hour, func(c *Config) time.Duration { return c.WebSocket.PingInterval }},
	{"modbus.max_age", 0, 24 * time.Hour, func(c *Config) time.Duration { return c.Modbus.MaxAge }}, // 0 = values never go stale
	{"websocket.handshake_timeout", 100 * time.Millisecond, 5 * time.Minute, func(c *Config) time.Duration { return c.WebSocket.HandshakeTimeout }},
	{"quarantine.hold", 100 * time.Millisecond, 10 * time.Minute, func(c *Config) time.Duration { return c.Quarantine.Hold }},
	{"quarantine.ban_window", time.Second, 24 * time.Hour, func(c *Config) time.Duration { return c.Quarantine.BanWindow }},
	{"quarantine.ban_for", time.Second, 7 * 24 * time.Hour, func(c *Config) time.Duration { return c.Quarantine.BanFor }},
	{"admin.idle_timeout", 100 * time.Millisecond, 5 * time.Minute, func(c *Config) time.Duration { return c.Admin.IdleTimeout }},
	{"rudp.idle_timeout", time.Second, 24 * time.Hour, func(c *Config) time.Duration { return c.RUDP.IdleTimeout }},
	{"rudp.keepalive", 100 * time.Millisecond, 8 * time.Hour, func(c *Config) time.Duration { return c.RUDP.KeepAlive }}, // below idle_timeout (checkRUDP)
	{"rudp.handshake_timeout", 100 * time.Millisecond, 5 * time.Minute, func(c *Config) time.Duration { return c.RUDP.HandshakeTimeout }},
	{"rudp.max_ack_delay", 0, time.Second, func(c *Config) time.Duration { return c.RUDP.MaxAckDelay }},
	{"rudp.initial_rtt", time.Millisecond, 10 * time.Second, func(c *Config) time.Duration { return c.RUDP.InitialRTT }},
	{"rudp.min_rto", time.Millisecond, time.Minute, func(c *Config) time.Duration { return c.RUDP.MinRTO }},
	{"rudp.max_rto", time.Millisecond, time.Minute, func(c *Config) time.Duration { return c.RUDP.MaxRTO }}, // at least min_rto (checkRUDP)
	{"rudp.cookie_lifetime", time.Second, time.Hour, func(c *Config) time.Duration { return c.RUDP.CookieLifetime }},
	{"rudp.cookie_rotation", time.Second, 24 * time.Hour, func(c *Config) time.Duration { return c.RUDP.CookieRotation }},
}
