package websocket

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Opcode is a frame's opcode (RFC 6455 §5.2).
type Opcode uint8

// The opcodes RFC 6455 defines; every other value is reserved.
const (
	OpContinuation Opcode = 0x0
	OpText         Opcode = 0x1
	OpBinary       Opcode = 0x2
	OpClose        Opcode = 0x8
	OpPing         Opcode = 0x9
	OpPong         Opcode = 0xA
)

// IsControl reports whether o is a control opcode (close, ping, pong or a
// reserved control value).
func (o Opcode) IsControl() bool { return o&0x8 != 0 }

// known reports whether o is defined by RFC 6455.
func (o Opcode) known() bool {
	switch o {
	case OpContinuation, OpText, OpBinary, OpClose, OpPing, OpPong:
		return true
	}
	return false
}

// Frame header layout limits.
const (
	// MaxHeaderSize is the longest frame header: 2 bytes, a 64-bit length
	// and a mask key.
	MaxHeaderSize = 2 + 8 + 4
	// MaxControlPayload is the most a control frame may carry.
	MaxControlPayload = 125
	// MaxFragments caps the frames of one message (or one per KiB of
	// Scanner.MaxMessage, if that is more): a frame header costs buffer
	// space without counting towards the message size, so a flood of empty
	// fragments must end somewhere. Clients fragment rarely and coarsely
	// (gorilla every 4 KiB, browsers not at all).
	MaxFragments = 1024
)

// The RSV bits as they sit in Header.RSV.
const (
	rsv1 = 0x4 // permessage-deflate's "compressed" bit
	rsv2 = 0x2
	rsv3 = 0x1
)

// Header is one parsed frame header.
type Header struct {
	Fin    bool
	RSV    uint8 // RSV1..RSV3 as the bits 0x4, 0x2, 0x1
	Opcode Opcode
	Masked bool
	Mask   [4]byte
	Length uint64 // payload bytes
	Size   int    // header bytes, 2..MaxHeaderSize
}

// ParseHeader parses the frame header at the start of p. It returns n == 0
// and a nil error while p holds only part of it. The only header that is
// malformed on its own is a 64-bit length with its top bit set; what is
// allowed in context (masking, opcodes, sizes) is the Scanner's to judge.
func ParseHeader(p []byte) (h Header, n int, err error) {
	if len(p) < 2 {
		return Header{}, 0, nil
	}
	h.Fin = p[0]&0x80 != 0
	h.RSV = p[0] >> 4 & 0x7
	h.Opcode = Opcode(p[0] & 0xf)
	h.Masked = p[1]&0x80 != 0
	n = 2
	switch l := p[1] & 0x7f; l {
	case 126:
		n += 2
	case 127:
		n += 8
	default:
		h.Length = uint64(l)
	}
	if h.Masked {
		n += 4
	}
	if len(p) < n {
		return Header{}, 0, nil
	}
	switch p[1] & 0x7f {
	case 126:
		h.Length = uint64(binary.BigEndian.Uint16(p[2:]))
	case 127:
		h.Length = binary.BigEndian.Uint64(p[2:])
		if h.Length > math.MaxInt64 {
			return Header{}, 0, fmt.Errorf("%w: 64-bit length with the top bit set", ErrProtocol)
		}
	}
	if h.Masked {
		copy(h.Mask[:], p[n-4:n])
	}
	h.Size = n
	return h, n, nil
}

// Kind says what a scanner Event covers.
type Kind uint8

// The event kinds.
const (
	// NeedMore: the input ends inside a frame header or a control frame;
	// nothing is consumed.
	NeedMore Kind = iota
	// Control: one whole control frame, header and payload.
	Control
	// DataHeader: the header of a data frame; its payload follows as
	// Payload events.
	DataHeader
	// Payload: payload bytes of the current data frame.
	Payload
)

// Event is one step of a Scanner.
type Event struct {
	Kind   Kind
	Header Header // for Control and DataHeader
	N      int    // input bytes the event covers
	End    bool   // the data message is complete with these bytes
}

// Scanner splits a client's byte stream into control frames and the bytes
// of data messages, checking what RFC 6455 requires of a client's frames
// before any payload is buffered. It is pure: no I/O, no allocation. Its
// zero value (with MaxMessage set) is ready; after an error its state is
// undefined and the connection must be closed.
type Scanner struct {
	MaxMessage int64 // payload bytes per message, summed over its frames

	// Packed (32 bytes): a Scanner lives in every session for the
	// connection's life.
	frameLeft  uint64 // payload bytes of the current data frame still to come
	size       int64  // payload bytes of the open message so far
	frames     int32  // frames of the open message so far
	inMessage  bool   // a data message has started and its last frame is not complete
	frameFinal bool   // the current data frame is the message's last

	Deflate bool // permessage-deflate negotiated: RSV1 allowed on a message's first frame
}

// Next looks at the start of p, the input not consumed yet, and says what
// it holds. The caller consumes ev.N bytes and calls again. Errors wrap
// ErrProtocol (close 1002) or ErrTooBig (close 1009).
func (s *Scanner) Next(p []byte) (Event, error) {
	if s.frameLeft > 0 {
		if len(p) == 0 {
			return Event{}, nil
		}
		n := min(s.frameLeft, uint64(len(p)))
		s.frameLeft -= n
		return Event{Kind: Payload, N: int(n), End: s.finishFrame()}, nil
	}
	h, n, err := ParseHeader(p)
	if err != nil || n == 0 {
		return Event{}, err
	}
	if err := s.check(h); err != nil {
		return Event{}, err
	}
	if h.Opcode.IsControl() {
		if uint64(len(p)-n) < h.Length {
			return Event{}, nil
		}
		return Event{Kind: Control, Header: h, N: n + int(h.Length)}, nil
	}
	s.inMessage = true
	s.frames++
	s.size += int64(h.Length)
	s.frameLeft = h.Length
	s.frameFinal = h.Fin
	return Event{Kind: DataHeader, Header: h, N: n, End: s.finishFrame()}, nil
}

// finishFrame closes the message when its last frame is complete.
func (s *Scanner) finishFrame() bool {
	if s.frameLeft > 0 || !s.frameFinal {
		return false
	}
	s.inMessage, s.size, s.frames, s.frameFinal = false, 0, 0, false
	return true
}

// check applies RFC 6455's rules for a client's frame, and the message
// size limit, to a header.
func (s *Scanner) check(h Header) error {
	switch {
	case !h.Masked:
		return fmt.Errorf("%w: unmasked client frame", ErrProtocol)
	case !h.Opcode.known():
		return fmt.Errorf("%w: reserved opcode %#x", ErrProtocol, uint8(h.Opcode))
	case h.RSV&(rsv2|rsv3) != 0:
		return fmt.Errorf("%w: RSV2 or RSV3 set", ErrProtocol)
	case h.RSV&rsv1 != 0 && (!s.Deflate || h.Opcode == OpContinuation || h.Opcode.IsControl()):
		return fmt.Errorf("%w: RSV1 set without a compressed message to start", ErrProtocol)
	}
	if h.Opcode.IsControl() {
		if h.Length > MaxControlPayload {
			return fmt.Errorf("%w: control frame of %d bytes", ErrProtocol, h.Length)
		}
		if !h.Fin {
			return fmt.Errorf("%w: fragmented control frame", ErrProtocol)
		}
		return nil
	}
	if h.Opcode == OpContinuation && !s.inMessage {
		return fmt.Errorf("%w: continuation frame without a message to continue", ErrProtocol)
	}
	if h.Opcode != OpContinuation && s.inMessage {
		return fmt.Errorf("%w: new data frame inside a fragmented message", ErrProtocol)
	}
	if limit := max(MaxFragments, int(s.MaxMessage>>10)); int(s.frames) >= limit {
		return fmt.Errorf("%w: more than %d fragments", ErrTooBig, limit)
	}
	if h.Length > uint64(max(s.MaxMessage-s.size, 0)) {
		return fmt.Errorf("%w: %d bytes and more, limit %d", ErrTooBig, uint64(s.size)+h.Length, s.MaxMessage)
	}
	return nil
}

// unmask XORs p with the frame's mask key, in place; pos is p's offset in
// the payload.
func unmask(key [4]byte, p []byte) {
	for i := range p {
		p[i] ^= key[i&3]
	}
}

// appendServerFrame appends p as one final, unmasked server frame of
// opcode op, as gorilla writes an uncompressed message (RFC 6455 §5.2:
// the shortest length encoding).
func appendServerFrame(dst []byte, op Opcode, p []byte) []byte {
	dst = append(dst, 0x80|byte(op))
	switch n := len(p); {
	case n <= 125:
		dst = append(dst, byte(n))
	case n <= 0xffff:
		dst = append(dst, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return append(dst, p...)
}
