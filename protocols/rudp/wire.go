package rudp

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// The packet header: 16 bytes, network byte order.
//
//	0      magic0  0xE3
//	1      magic1  0x55
//	2      version (high nibble, 1) | packet type (low nibble)
//	3      flags   (bit 0: sealed with the pre-shared key; others 0)
//	4..11  session id (INITIAL and RETRY: the client's nonce)
//	12..15 packet number, low 32 bits
//
// The frames follow; a packet ends with its integrity check: CRC-32C (4
// bytes) in plain mode, the AEAD tag (16 bytes) in sealed mode.
const (
	Magic0    = 0xE3
	Magic1    = 0x55
	Version   = 1
	HeaderLen = 16
)

// PacketType is the low nibble of header byte 2.
type PacketType uint8

// The packet types. INITIAL and RETRY are the stateless cookie exchange;
// HANDSHAKE carries the server's ACCEPT; DATA carries everything else.
const (
	TypeInitial   PacketType = 1 // client -> server, no session yet
	TypeRetry     PacketType = 2 // server -> client, the cookie
	TypeHandshake PacketType = 3 // server -> client, the session id and parameters
	TypeData      PacketType = 4 // both ways, within a session
)

// flagSealed marks a packet whose frames are encrypted and authenticated
// with a key derived from the device's pre-shared key.
const flagSealed = 0x01

// Header is a decoded packet header.
type Header struct {
	Type      PacketType
	Sealed    bool
	SessionID uint64 // INITIAL and RETRY: the client's nonce
	Number    uint32 // low 32 bits of the packet number
}

// Errors of the wire codec.
var (
	ErrShort      = errors.New("rudp: datagram shorter than a header")
	ErrMagic      = errors.New("rudp: bad magic")
	ErrVersion    = errors.New("rudp: unsupported version")
	ErrType       = errors.New("rudp: unknown packet type")
	ErrFlags      = errors.New("rudp: reserved header flags set")
	ErrNoSession  = errors.New("rudp: zero session id")
	ErrIntegrity  = errors.New("rudp: integrity check failed")
	ErrMalformed  = errors.New("rudp: malformed frame")
	ErrFrameType  = errors.New("rudp: frame not allowed in this packet type")
	ErrTooLarge   = errors.New("rudp: message larger than the limit")
	ErrQueueFull  = errors.New("rudp: send queue full")
	ErrMemory     = errors.New("rudp: memory budget exhausted")
	ErrClosed     = errors.New("rudp: session closed")
	ErrIdle       = errors.New("rudp: peer silent for the idle timeout")
	ErrHandshake  = errors.New("rudp: handshake timed out")
	ErrPeerClosed = errors.New("rudp: peer closed the session")
)

// ParseHeader decodes the fixed header of b. It checks the magic, the
// version, the type and the flags, and that a DATA or HANDSHAKE packet
// names a session; it does not check the integrity trailer.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, ErrShort
	}
	if b[0] != Magic0 || b[1] != Magic1 {
		return Header{}, ErrMagic
	}
	if b[2]>>4 != Version {
		return Header{}, ErrVersion
	}
	h := Header{
		Type:      PacketType(b[2] & 0x0f),
		Sealed:    b[3]&flagSealed != 0,
		SessionID: binary.BigEndian.Uint64(b[4:12]),
		Number:    binary.BigEndian.Uint32(b[12:16]),
	}
	if h.Type < TypeInitial || h.Type > TypeData {
		return Header{}, ErrType
	}
	if b[3]&^flagSealed != 0 {
		return Header{}, ErrFlags
	}
	if h.SessionID == 0 {
		return Header{}, ErrNoSession
	}
	return h, nil
}

// AppendHeader appends h's 16 bytes to b.
func AppendHeader(b []byte, h Header) []byte {
	var flags byte
	if h.Sealed {
		flags = flagSealed
	}
	b = append(b, Magic0, Magic1, Version<<4|byte(h.Type)&0x0f, flags)
	b = binary.BigEndian.AppendUint64(b, h.SessionID)
	return binary.BigEndian.AppendUint32(b, h.Number)
}

// Route picks the worker, 0..workers-1, that owns datagram d from peer:
// the session id modulo workers for DATA packets (an Endpoint only hands
// out ids that map to itself, so a session stays on its worker whatever
// its source address becomes), and a hash of the source address for
// everything else (the client's first packets, before it has an id; the
// cookie exchange is stateless, so any worker may answer it, and the
// worker that answers the client's second INITIAL, from the same address,
// is the one that creates the session). Pure, no allocation.
func Route(peer netip.AddrPort, d []byte, workers int) int {
	if workers <= 1 {
		return 0
	}
	if len(d) >= HeaderLen && d[0] == Magic0 && d[1] == Magic1 && PacketType(d[2]&0x0f) == TypeData {
		return int(binary.BigEndian.Uint64(d[4:12]) % uint64(workers))
	}
	return int(addrHash(peer) % uint64(workers))
}

// addrHash mixes an address and port into 64 bits, the same on every
// loop and every run (routing must agree across loops).
func addrHash(p netip.AddrPort) uint64 {
	a := p.Addr().As16()
	h := binary.LittleEndian.Uint64(a[0:8])*0x9E3779B97F4A7C15 ^ binary.LittleEndian.Uint64(a[8:16])
	h ^= uint64(p.Port()) << 17
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	h *= 0xC4CEB9FE1A85EC53
	return h ^ h>>33
}

// expandNumber recovers a 64-bit sequence or packet number from its low 32
// bits, choosing the value nearest to expected.
func expandNumber(wire uint32, expected uint64) uint64 {
	const span = 1 << 32
	candidate := expected&^(span-1) | uint64(wire)
	switch {
	case candidate+span/2 <= expected && candidate+span > candidate:
		return candidate + span
	case candidate > expected+span/2 && candidate >= span:
		return candidate - span
	}
	return candidate
}
