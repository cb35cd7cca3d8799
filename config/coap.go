package config

import (
	"strconv"
	"time"
)

// CoAP sets the CoAP server (protocols/coap), over UDP and over TCP. Every
// limit has a default (Defaults) and a range (checkCoAP).
type CoAP struct {
	MaxPeers         int           `yaml:"max_peers"`         // UDP peers remembered at once, in all; past it the longest idle non-observer is forgotten
	PeerIdle         time.Duration `yaml:"peer_idle"`         // a UDP peer with no observation is forgotten after this long without a datagram
	MaxObservations  int           `yaml:"max_observations"`  // observations per peer or connection
	BlockSize        int           `yaml:"block_size"`        // payload per block of a block-wise transfer (16..1024, a power of two)
	MaxBody          int           `yaml:"max_body"`          // a block-wise request body, in all (bytes)
	Uploads          int           `yaml:"uploads"`           // block-wise request bodies being assembled at once, in all
	ResponseCache    int           `yaml:"response_cache"`    // answers kept per worker to repeat to duplicate requests (count)
	ExchangeLifetime time.Duration `yaml:"exchange_lifetime"` // how long an answer is kept for duplicates (RFC 7252 EXCHANGE_LIFETIME)
	AckTimeout       time.Duration `yaml:"ack_timeout"`       // first retransmission of a confirmable notification (RFC 7252 ACK_TIMEOUT)
	MaxRetransmit    int           `yaml:"max_retransmit"`    // retransmissions before an observer is dead (RFC 7252 MAX_RETRANSMIT)
	ConfirmEvery     int           `yaml:"confirm_every"`     // every Nth notification is confirmable (RFC 7641 4.5)
	ConfirmInterval  time.Duration `yaml:"confirm_interval"`  // and one at least this often
	Queue            int           `yaml:"queue"`             // bus messages queued per observing peer or connection
	TCPMaxMessage    int           `yaml:"tcp_max_message"`   // Max-Message-Size this server announces in its CSM over TCP (bytes)
	Delete           []string      `yaml:"delete"`            // topic filters whose retained value DELETE may clear; [] = none
}

// defaultCoAP are the CoAP defaults, also in default.yaml.
func defaultCoAP() CoAP {
	return CoAP{
		MaxPeers: 10000, PeerIdle: 5 * time.Minute, MaxObservations: 16,
		BlockSize: 1024, MaxBody: 65536, Uploads: 64, ResponseCache: 4096,
		ExchangeLifetime: 247 * time.Second, AckTimeout: 2 * time.Second, MaxRetransmit: 4,
		ConfirmEvery: 20, ConfirmInterval: 24 * time.Hour, Queue: 256, TCPMaxMessage: 8192,
	}
}

// checkCoAP checks the coap section: every number in its range, the block
// size a power of two, the delete filters well formed.
func (v *validator) checkCoAP() {
	c := v.c.CoAP
	for _, r := range []struct {
		path     string
		n        int
		min, max int
	}{
		{"coap.max_peers", c.MaxPeers, 1, 1000000},
		{"coap.max_observations", c.MaxObservations, 1, 64}, // a bus subscriber holds at most 64 filters
		{"coap.block_size", c.BlockSize, 16, 1024},
		{"coap.max_body", c.MaxBody, 16, 16 * mib},
		{"coap.uploads", c.Uploads, 1, 65536},
		{"coap.response_cache", c.ResponseCache, 16, mib},
		{"coap.max_retransmit", c.MaxRetransmit, 0, 20},
		{"coap.confirm_every", c.ConfirmEvery, 1, 1000000},
		{"coap.queue", c.Queue, 1, mib},
		{"coap.tcp_max_message", c.TCPMaxMessage, 1152, 16 * mib},
	} {
		if r.n < r.min || r.n > r.max {
			v.fail(r.path, "must be between %d and %d, not %d", r.min, r.max, r.n)
		}
	}
	if n := c.BlockSize; n&(n-1) != 0 {
		v.fail("coap.block_size", "must be a power of two (16, 32, ... 1024), not %d", n)
	}
	for _, r := range []struct {
		path     string
		d        time.Duration
		min, max time.Duration
	}{
		{"coap.peer_idle", c.PeerIdle, time.Second, 24 * time.Hour},
		{"coap.exchange_lifetime", c.ExchangeLifetime, time.Second, time.Hour},
		{"coap.ack_timeout", c.AckTimeout, 100 * time.Millisecond, time.Minute},
		{"coap.confirm_interval", c.ConfirmInterval, time.Second, 24 * time.Hour}, // RFC 7641 4.5: at least every 24 h
	} {
		if r.d < r.min || r.d > r.max {
			v.fail(r.path, "must be between %s and %s, not %s", shortDuration(r.min), shortDuration(r.max), shortDuration(r.d))
		}
	}
	if l := v.c.Limits.MaxInput; v.servesProto("coap") && c.TCPMaxMessage > l {
		// A CoAP-over-TCP message is consumed only once it is whole.
		v.fail("coap.tcp_max_message", "must fit limits.max_input (%d), not %d", l, c.TCPMaxMessage)
	}
	if len(c.Delete) > 256 {
		v.fail("coap.delete", "at most 256 filters, not %d", len(c.Delete))
	}
	for i, f := range c.Delete {
		if problem := coapFilterProblem(f); problem != "" {
			v.fail("coap.delete["+strconv.Itoa(i)+"]", "%s", problem)
		}
	}
}

// coapFilterProblem checks an MQTT-style topic filter the way the bus
// does (config imports nothing of ours): levels split by "/", "+" a
// whole level, "#" a whole last level.
func coapFilterProblem(f string) string {
	if f == "" || len(f) > 256 {
		return "must be a topic filter of 1 to 256 bytes"
	}
	start := 0
	for i := 0; i <= len(f); i++ {
		if i < len(f) && f[i] != '/' {
			continue
		}
		level := f[start:i]
		for j := 0; j < len(level); j++ {
			if (level[j] == '+' || level[j] == '#') && len(level) != 1 {
				return "a wildcard (+ or #) must be a whole level: " + strconv.Quote(f)
			}
		}
		if level == "#" && i != len(f) {
			return "# must be the last level: " + strconv.Quote(f)
		}
		start = i + 1
	}
	return ""
}
