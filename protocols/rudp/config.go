package rudp

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the knobs of the core; zero fields take the defaults
// below (WithDefaults). The README lists the YAML keys they map to.
type Config struct {
	// MaxDatagram is the largest datagram sent (UDP payload bytes): the
	// path payload that messages are fragmented to. The smaller of the
	// two sides' values is used.
	MaxDatagram int
	// MaxMessage is the largest reliable message, in bytes.
	MaxMessage int
	// Window is the receive window in fragments: how far past the first
	// missing fragment the peer may send (flow control).
	Window int
	// SendQueue bounds a session's reliable bytes not yet acknowledged.
	SendQueue int
	// DatagramQueue bounds unreliable messages waiting in each direction.
	DatagramQueue int
	// IdleTimeout: a session with nothing heard from its peer for this
	// long is dead. The smaller of the two sides' values is used.
	IdleTimeout time.Duration
	// KeepAlive: a client that has sent nothing for this long sends a
	// keepalive; it is capped at a third of the idle timeout. Only a keepalive sent when
	// the peer has been silent for IdleTimeout-KeepAlive asks for an
	// answer (a PING); the others are a PADDING packet, which refreshes
	// the NAT mapping and the server's idle timer and costs the server no
	// reply.
	KeepAlive time.Duration
	// HandshakeTimeout: a client that has no ACCEPT after this long gives up.
	HandshakeTimeout time.Duration
	// MaxAckDelay: how long a receiver may hold an ACK back to combine it
	// with a second packet or with data going back (TCP's delayed ACK):
	// sparse telemetry then costs one ACK packet per two messages. Out of
	// order arrivals are acknowledged at once, so loss detection does not
	// wait for it; the sender's probe timer learns the peer's delay from
	// its ACKs.
	MaxAckDelay time.Duration
	// InitialRTT, MinRTO and MaxRTO shape the retransmission timer
	// (RFC 6298: RTO = SRTT + 4 RTTVAR, from InitialRTT/2 as RTTVAR).
	// MaxRTO also caps the exponential backoff.
	InitialRTT, MinRTO, MaxRTO time.Duration
	// CookieLifetime is how long a RETRY cookie is accepted;
	// CookieRotation how often the key that makes cookies changes.
	CookieLifetime, CookieRotation time.Duration
	// MaxSessions bounds one Endpoint's sessions.
	MaxSessions int
	// MemoryBudget bounds the bytes of message buffers (queued, in
	// flight, out of order or not yet read) that all sessions hold
	// together: one Endpoint's, or all of a Handler's workers' (they
	// share one Budget).
	MemoryBudget int
	// PendingRetries bounds the stateless replies an Endpoint holds
	// between Input and AppendDatagram; more are dropped.
	PendingRetries int
	// Keys, when set, turns on sealed mode: every session is encrypted
	// and authenticated with a key derived from its device's pre-shared
	// key (ChaCha20-Poly1305). A server with Keys refuses plain clients.
	Keys Keys
	// DeviceID and PSK are a client's identity in sealed mode.
	DeviceID string
	PSK      []byte
}

// Defaults.
const (
	DefaultMaxDatagram      = 1200
	DefaultMaxMessage       = 64 << 10
	DefaultWindow           = 256
	DefaultSendQueue        = 256 << 10
	DefaultDatagramQueue    = 64
	DefaultIdleTimeout      = 30 * time.Second
	DefaultKeepAlive        = 10 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultMaxAckDelay      = 2 * time.Millisecond
	DefaultInitialRTT       = 100 * time.Millisecond
	DefaultMinRTO           = 200 * time.Millisecond
	DefaultMaxRTO           = 2 * time.Second
	DefaultCookieLifetime   = 30 * time.Second
	DefaultCookieRotation   = 2 * time.Minute
	DefaultMaxSessions      = 200_000
	DefaultMemoryBudget     = 256 << 20
	DefaultPendingRetries   = 256
)

// Hard limits a configuration may not pass.
const (
	MinDatagram = 256   // room for a HELLO and a useful fragment
	MaxDatagram = 65000 // a UDP payload with room for IP headers
	MaxWindow   = 1 << 15
)

// Keys maps device ids to their 32-byte pre-shared keys.
type Keys map[string][]byte

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("rudp: bad configuration")

// WithDefaults returns c with zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxDatagram, DefaultMaxDatagram)
	def(&c.MaxMessage, DefaultMaxMessage)
	def(&c.Window, DefaultWindow)
	def(&c.SendQueue, DefaultSendQueue)
	def(&c.DatagramQueue, DefaultDatagramQueue)
	defDur(&c.IdleTimeout, DefaultIdleTimeout)
	defDur(&c.KeepAlive, DefaultKeepAlive)
	defDur(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	defDur(&c.MaxAckDelay, DefaultMaxAckDelay)
	defDur(&c.InitialRTT, DefaultInitialRTT)
	defDur(&c.MinRTO, DefaultMinRTO)
	defDur(&c.MaxRTO, DefaultMaxRTO)
	defDur(&c.CookieLifetime, DefaultCookieLifetime)
	defDur(&c.CookieRotation, DefaultCookieRotation)
	def(&c.MaxSessions, DefaultMaxSessions)
	def(&c.MemoryBudget, DefaultMemoryBudget)
	def(&c.PendingRetries, DefaultPendingRetries)
	return c
}

// Validate reports every inconsistency of a defaulted configuration.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if c.MaxDatagram < MinDatagram || c.MaxDatagram > MaxDatagram {
		bad("max_datagram %d outside %d..%d", c.MaxDatagram, MinDatagram, MaxDatagram)
	}
	if c.Window < 4 || c.Window > MaxWindow {
		bad("window %d outside 4..%d", c.Window, MaxWindow)
	}
	if frag := c.MaxDatagram - HeaderLen - tagLen - dataOverhead; frag > 0 && c.MaxMessage > (c.Window/2)*frag {
		bad("max_message %d does not fit half the window (%d fragments of %d bytes)", c.MaxMessage, c.Window, frag)
	}
	if c.SendQueue < c.MaxMessage {
		bad("send_queue %d smaller than max_message %d", c.SendQueue, c.MaxMessage)
	}
	if c.KeepAlive >= c.IdleTimeout {
		bad("keepalive %v not below idle_timeout %v", c.KeepAlive, c.IdleTimeout)
	}
	if c.MinRTO > c.MaxRTO {
		bad("min_rto %v above max_rto %v", c.MinRTO, c.MaxRTO)
	}
	if c.IdleTimeout > time.Duration(1<<32-1)*time.Millisecond {
		bad("idle_timeout %v too long", c.IdleTimeout)
	}
	for id, k := range c.Keys {
		if len(id) == 0 || len(id) > MaxDeviceID {
			bad("device id %q: length outside 1..%d", id, MaxDeviceID)
		}
		if len(k) != 32 {
			bad("device %q: key is %d bytes, want 32", id, len(k))
		}
	}
	if (c.DeviceID != "") != (len(c.PSK) != 0) {
		bad("device_id and psk go together")
	}
	if len(c.PSK) != 0 && len(c.PSK) != 32 {
		bad("psk is %d bytes, want 32", len(c.PSK))
	}
	return errors.Join(errs...)
}

// fragmentSize is the reliable payload one DATA frame carries in a
// datagram of maxDatagram bytes (room left for a small ACK and a sealed
// trailer, so a retransmission always fits whatever rides along).
func fragmentSize(maxDatagram int) int {
	return maxDatagram - HeaderLen - tagLen - dataOverhead - ackFixedLen
}
