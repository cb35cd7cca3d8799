// Package private implements edgemux's own binary publish/subscribe
// protocol: the frame codec, the gateway-side session handler over the
// topic bus, and a small Go client. The wire format is specified in
// SPEC.md; nothing in the codec depends on TCP, so the same frames can be
// carried by the reliable UDP core.
package private

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Header constants. Magic0 and Magic1 must agree with sniff's: the
// sniffer recognises the protocol by them, and this package does not
// import sniff (it sits below protocols).
const (
	Magic0    = 0xE3 // first header byte
	Magic1    = 0x4D // second header byte ('M')
	Version   = 1    // the only protocol version
	HeaderLen = 12   // magic(2) version(1) type(1) length(4) crc(4)
)

// Fixed field limits of version 1 (SPEC.md section 6).
const (
	MaxDeviceID  = 128 // bytes of a HELLO device id
	MaxErrorText = 256 // bytes of ERROR text; longer text is truncated
	MaxPingToken = 8   // bytes of a PING/PONG payload
	maxU16       = 1<<16 - 1
	maxU8        = 1<<8 - 1
)

// DefaultMaxFrame is the payload limit used when a caller passes
// maxPayload <= 0 to ParseFrame.
const DefaultMaxFrame = 65536

// Type is a frame's message type.
type Type uint8

// Message types.
const (
	TypeHello Type = 1
	TypePub   Type = 2
	TypeSub   Type = 3
	TypeUnsub Type = 4
	TypePing  Type = 5
	TypePong  Type = 6
	TypeAck   Type = 7
	TypeError Type = 8
	// TypeDropped tells a client how many of its deliveries the gateway
	// dropped (SPEC.md 2.7); server to client only.
	TypeDropped Type = 9
)

var typeNames = [...]string{"", "HELLO", "PUB", "SUB", "UNSUB", "PING", "PONG", "ACK", "ERROR", "DROPPED"}

// Valid reports whether t is a version 1 message type.
func (t Type) Valid() bool { return t >= TypeHello && t <= TypeDropped }

// String names the type as SPEC.md does.
func (t Type) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return "UNKNOWN"
}

// Framing errors returned by ParseFrame. Each maps to a Code with
// CodeOf.
var (
	ErrBadMagic      = errors.New("private: bad magic")
	ErrBadVersion    = errors.New("private: unsupported version")
	ErrUnknownType   = errors.New("private: unknown frame type")
	ErrFrameTooLarge = errors.New("private: frame too large")
	ErrBadCRC        = errors.New("private: bad crc")
)

// Payload and encoder errors.
var (
	// ErrMalformed means a payload does not match its message's layout.
	ErrMalformed = errors.New("private: malformed payload")
	// ErrFieldTooLong is returned by encoders for a field that does not fit
	// its length prefix or its fixed limit.
	ErrFieldTooLong = errors.New("private: field too long")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frame is one parsed frame. Payload aliases the input given to
// ParseFrame: copy it to keep it past the input buffer's life.
type Frame struct {
	Type    Type
	Payload []byte
}

// AppendFrame appends a complete frame (header and payload) to dst.
func AppendFrame(dst []byte, typ Type, payload []byte) []byte {
	start := len(dst)
	dst = appendHeader(dst, typ)
	dst = append(dst, payload...)
	return finishFrame(dst, start)
}

// appendHeader appends a header whose length and CRC finishFrame fills in.
func appendHeader(dst []byte, typ Type) []byte {
	return append(dst, Magic0, Magic1, Version, byte(typ), 0, 0, 0, 0, 0, 0, 0, 0)
}

// finishFrame writes length and CRC into the header that starts at start,
// once its payload has been appended after it. Building in place keeps the
// typed encoders to one copy and no allocation beyond dst's growth.
func finishFrame(frame []byte, start int) []byte {
	hdr := frame[start : start+HeaderLen]
	payload := frame[start+HeaderLen:]
	binary.BigEndian.PutUint32(hdr[4:8], uint32(len(payload)))
	crc := crc32.Update(0, castagnoli, hdr[:8])
	crc = crc32.Update(crc, castagnoli, payload)
	binary.BigEndian.PutUint32(hdr[8:12], crc)
	return frame
}

// ParseFrame parses the frame at the start of in. It returns the frame and
// the bytes it used, or n == 0 and a nil error when in holds only part of a
// frame. maxPayload bounds the payload length (DefaultMaxFrame when <= 0).
// Header fields are checked as soon as their bytes are in, so garbage is
// rejected without waiting for a whole header. Frame.Payload aliases in.
func ParseFrame(in []byte, maxPayload int) (f Frame, n int, err error) {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxFrame
	}
	if err := checkHeaderPrefix(in, maxPayload); err != nil {
		return Frame{}, 0, err
	}
	if len(in) < HeaderLen {
		return Frame{}, 0, nil
	}
	size := HeaderLen + int(binary.BigEndian.Uint32(in[4:8]))
	if len(in) < size {
		return Frame{}, 0, nil
	}
	payload := in[HeaderLen:size:size]
	crc := crc32.Update(0, castagnoli, in[:8])
	crc = crc32.Update(crc, castagnoli, payload)
	if crc != binary.BigEndian.Uint32(in[8:12]) {
		return Frame{}, 0, ErrBadCRC
	}
	return Frame{Type: Type(in[3]), Payload: payload}, size, nil
}

// checkHeaderPrefix validates whatever part of the first 8 header bytes in
// holds.
func checkHeaderPrefix(in []byte, maxPayload int) error {
	switch {
	case len(in) > 0 && in[0] != Magic0, len(in) > 1 && in[1] != Magic1:
		return ErrBadMagic
	case len(in) > 2 && in[2] != Version:
		return ErrBadVersion
	case len(in) > 3 && !Type(in[3]).Valid():
		return ErrUnknownType
	case len(in) >= 8 && uint64(binary.BigEndian.Uint32(in[4:8])) > uint64(maxPayload):
		return ErrFrameTooLarge
	}
	return nil
}

// reader walks a payload; the first short read sets bad, and every later
// read returns zero values, so decoders check once at the end.
type reader struct {
	p   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n > len(r.p) {
		r.bad = true
		return nil
	}
	b := r.p[:n:n]
	r.p = r.p[n:]
	return b
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// done reports whether every read fit and, when exact, nothing is left.
func (r *reader) done(exact bool) bool {
	return !r.bad && (!exact || len(r.p) == 0)
}
