package private

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Typed messages. Byte-slice fields returned by the decoders alias the
// payload they were decoded from (no copies, no allocations); encoders
// append a complete frame to dst and, on error, return dst unchanged.

// Hello is the first frame a client sends (SPEC.md 2.1).
type Hello struct {
	DeviceID  []byte // 1..MaxDeviceID bytes of UTF-8, no control characters
	Keepalive uint16 // seconds; advisory
	Flags     uint8  // reserved, 0
}

// Pub is a publication (client to server) or a delivery (server to
// client), SPEC.md 2.2.
type Pub struct {
	MsgID uint32 // client: 0 = no ACK wanted; server deliveries: 0
	Flags uint8  // PubRetained on deliveries; clients send 0
	Topic []byte
	TS    int64  // Unix nanoseconds, set by the server on deliveries
	Src   []byte // source protocol, set by the server on deliveries
	Data  []byte
}

// PubRetained marks a delivery replayed from the last-value cache when a
// subscription was made, rather than published live.
const PubRetained uint8 = 0x01

// Sub is the payload of SUB and UNSUB (SPEC.md 2.3).
type Sub struct {
	MsgID  uint32 // 0 = no ACK wanted
	Filter []byte
}

// Ack answers HELLO (MsgID 0) and requests with a non-zero MsgID
// (SPEC.md 2.5).
type Ack struct {
	MsgID  uint32
	Status Code // CodeOK or the failure's code
}

// ErrorMsg is an ERROR frame's payload (SPEC.md 2.6).
type ErrorMsg struct {
	Code Code
	Text []byte
}

// DecodeHello decodes a HELLO payload.
func DecodeHello(p []byte) (Hello, error) {
	r := reader{p: p}
	id := r.take(int(r.u16()))
	h := Hello{DeviceID: id, Keepalive: r.u16(), Flags: r.u8()}
	if !r.done(true) {
		return Hello{}, fmt.Errorf("%w: HELLO layout", ErrMalformed)
	}
	if !validDeviceID(id) {
		return Hello{}, fmt.Errorf("%w: device id", ErrMalformed)
	}
	return h, nil
}

// validDeviceID: 1..MaxDeviceID bytes of UTF-8 without control characters,
// so an id can go into logs and metrics labels as it is.
func validDeviceID(id []byte) bool {
	if len(id) == 0 || len(id) > MaxDeviceID || !utf8.Valid(id) {
		return false
	}
	for _, c := range string(id) {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return false
		}
	}
	return true
}

// AppendHello appends a HELLO frame.
func AppendHello(dst []byte, h Hello) ([]byte, error) {
	if !validDeviceID(h.DeviceID) {
		return dst, fmt.Errorf("%w: device id", ErrMalformed)
	}
	start := len(dst)
	dst = appendHeader(dst, TypeHello)
	dst = appendString16(dst, h.DeviceID)
	dst = binary.BigEndian.AppendUint16(dst, h.Keepalive)
	dst = append(dst, h.Flags)
	return finishFrame(dst, start), nil
}

// DecodePub decodes a PUB payload.
func DecodePub(p []byte) (Pub, error) {
	r := reader{p: p}
	var m Pub
	m.MsgID = r.u32()
	m.Flags = r.u8()
	m.Topic = r.take(int(r.u16()))
	m.TS = int64(r.u64())
	m.Src = r.take(int(r.u8()))
	if !r.done(false) {
		return Pub{}, fmt.Errorf("%w: PUB layout", ErrMalformed)
	}
	m.Data = r.p
	return m, nil
}

// AppendPub appends a PUB frame.
func AppendPub(dst []byte, m Pub) ([]byte, error) {
	return appendPub(dst, pubHead{m.MsgID, m.Flags, m.TS}, m.Topic, m.Src, m.Data)
}

// pubHead is a PUB's fixed-size fields.
type pubHead struct {
	msgID uint32
	flags uint8
	ts    int64
}

// appendPub takes strings or byte slices, so deliveries built from the
// bus's string topics need no conversion copies.
func appendPub[S ~string | ~[]byte](dst []byte, h pubHead, topic, src S, data []byte) ([]byte, error) {
	if len(topic) > maxU16 || len(src) > maxU8 {
		return dst, fmt.Errorf("%w: topic or source", ErrFieldTooLong)
	}
	start := len(dst)
	dst = appendHeader(dst, TypePub)
	dst = binary.BigEndian.AppendUint32(dst, h.msgID)
	dst = append(dst, h.flags)
	dst = appendString16(dst, topic)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.ts))
	dst = append(dst, byte(len(src)))
	dst = append(dst, src...)
	dst = append(dst, data...)
	return finishFrame(dst, start), nil
}

// DecodeSub decodes a SUB or UNSUB payload.
func DecodeSub(p []byte) (Sub, error) {
	r := reader{p: p}
	s := Sub{MsgID: r.u32()}
	s.Filter = r.take(int(r.u16()))
	if !r.done(true) {
		return Sub{}, fmt.Errorf("%w: SUB layout", ErrMalformed)
	}
	return s, nil
}

// AppendSub appends a SUB frame.
func AppendSub(dst []byte, s Sub) ([]byte, error) { return appendFilter(dst, TypeSub, s) }

// AppendUnsub appends an UNSUB frame.
func AppendUnsub(dst []byte, s Sub) ([]byte, error) { return appendFilter(dst, TypeUnsub, s) }

func appendFilter(dst []byte, typ Type, s Sub) ([]byte, error) {
	if len(s.Filter) > maxU16 {
		return dst, fmt.Errorf("%w: filter", ErrFieldTooLong)
	}
	start := len(dst)
	dst = appendHeader(dst, typ)
	dst = binary.BigEndian.AppendUint32(dst, s.MsgID)
	dst = appendString16(dst, s.Filter)
	return finishFrame(dst, start), nil
}

// DecodeAck decodes an ACK payload.
func DecodeAck(p []byte) (Ack, error) {
	r := reader{p: p}
	a := Ack{MsgID: r.u32(), Status: Code(r.u8())}
	if !r.done(true) {
		return Ack{}, fmt.Errorf("%w: ACK layout", ErrMalformed)
	}
	return a, nil
}

// AppendAck appends an ACK frame. A status that does not fit the status
// byte is sent as CodeInternal.
func AppendAck(dst []byte, a Ack) []byte {
	status := a.Status
	if status > maxU8 {
		status = CodeInternal
	}
	start := len(dst)
	dst = appendHeader(dst, TypeAck)
	dst = binary.BigEndian.AppendUint32(dst, a.MsgID)
	dst = append(dst, byte(status))
	return finishFrame(dst, start)
}

// DecodeError decodes an ERROR payload.
func DecodeError(p []byte) (ErrorMsg, error) {
	r := reader{p: p}
	e := ErrorMsg{Code: Code(r.u16())}
	n := int(r.u16())
	e.Text = r.take(n)
	if !r.done(true) || n > MaxErrorText {
		return ErrorMsg{}, fmt.Errorf("%w: ERROR layout", ErrMalformed)
	}
	return e, nil
}

// AppendError appends an ERROR frame. Text longer than MaxErrorText is cut
// at a rune boundary: it is for people, and an error must always be sent.
func AppendError(dst []byte, code Code, text string) []byte {
	if len(text) > MaxErrorText {
		cut := MaxErrorText
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	start := len(dst)
	dst = appendHeader(dst, TypeError)
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	dst = appendString16(dst, text)
	return finishFrame(dst, start)
}

// DecodeDropped decodes a DROPPED payload: the count of deliveries lost.
func DecodeDropped(p []byte) (uint64, error) {
	r := reader{p: p}
	n := r.u64()
	if !r.done(true) {
		return 0, fmt.Errorf("%w: DROPPED layout", ErrMalformed)
	}
	return n, nil
}

// AppendDropped appends a DROPPED frame saying n deliveries were lost.
func AppendDropped(dst []byte, n uint64) []byte {
	start := len(dst)
	dst = appendHeader(dst, TypeDropped)
	dst = binary.BigEndian.AppendUint64(dst, n)
	return finishFrame(dst, start)
}

// DecodePing checks a PING or PONG payload and returns its token.
func DecodePing(p []byte) ([]byte, error) {
	if len(p) > MaxPingToken {
		return nil, fmt.Errorf("%w: PING token", ErrMalformed)
	}
	return p, nil
}

// AppendPing appends a PING frame carrying token (at most MaxPingToken
// bytes).
func AppendPing(dst, token []byte) ([]byte, error) { return appendToken(dst, TypePing, token) }

// AppendPong appends a PONG frame echoing token.
func AppendPong(dst, token []byte) ([]byte, error) { return appendToken(dst, TypePong, token) }

func appendToken(dst []byte, typ Type, token []byte) ([]byte, error) {
	if len(token) > MaxPingToken {
		return dst, fmt.Errorf("%w: PING token", ErrFieldTooLong)
	}
	return AppendFrame(dst, typ, token), nil
}

// appendString16 appends a u16 length and s; callers check the length.
func appendString16[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}
