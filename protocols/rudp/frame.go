package rudp

import "encoding/binary"

// Frame types. A DATA frame's type carries its fragment flags in the low
// two bits (0x10..0x13).
const (
	framePadding       = 0x00 // one zero byte
	framePing          = 0x01 // ack-eliciting, no body
	frameAck           = 0x02
	frameDatagram      = 0x03 // unreliable message
	frameHello         = 0x04 // INITIAL: the client's parameters and cookie
	frameRetry         = 0x05 // RETRY: the cookie
	frameAccept        = 0x06 // HANDSHAKE: the server's parameters
	framePathChallenge = 0x07
	framePathResponse  = 0x08
	frameClose         = 0x09
	frameAuth          = 0x0a // INITIAL in sealed mode: HMAC over the packet so far
	frameData          = 0x10 // reliable fragment; | fragFirst | fragLast
)

// Fragment flags of a DATA frame.
const (
	fragFirst = 0x01
	fragLast  = 0x02
)

// Limits of the frame codec.
const (
	MaxSACKRanges  = 16  // SACK ranges in one ACK frame
	MaxDeviceID    = 128 // bytes of a device id in HELLO
	MaxCloseReason = 255 // bytes of a CLOSE reason
	cookieLen      = 20  // timestamp u32, MAC 16
	authLen        = 16  // AUTH frame's MAC
)

// Fixed frame sizes, type byte included.
const (
	dataOverhead     = 1 + 4 + 2 // type, seq, length
	datagramOverhead = 1 + 2
	ackFixedLen      = 1 + 4 + 2 + 2 + 1 // type, cumulative, delay, window, count
	sackRangeLen     = 4
	pathFrameLen     = 1 + 8
	acceptLen        = 1 + 8 + 2 + 2 + 4 + 4 + 4
)

// sackRange is [start, end) in the 32-bit wire space.
type sackRange struct{ start, end uint32 }

// ackFrame acknowledges every sequence number below cum and those in the
// SACK ranges, which are ascending, disjoint, not adjacent, above cum.
type ackFrame struct {
	cum    uint32
	delay  uint16 // the receiver's ack delay, units of 100 µs
	window uint16 // fragments the receiver accepts from cum on
	n      int
	ranges [MaxSACKRanges]sackRange
}

// dataFrame is one fragment of a reliable message.
type dataFrame struct {
	seq   uint32
	flags byte
	data  []byte // aliases the packet
}

// helloFrame is the client's first word.
type helloFrame struct {
	maxDatagram uint16
	window      uint16
	maxMessage  uint32
	idleMillis  uint32
	cookie      []byte // empty or cookieLen bytes, aliases the packet
	deviceID    []byte // aliases the packet
}

// acceptFrame is the server's answer in a HANDSHAKE packet.
type acceptFrame struct {
	nonce           uint64
	maxDatagram     uint16
	window          uint16
	maxMessage      uint32
	idleMillis      uint32
	keepaliveMillis uint32
}

// closeFrame ends a session.
type closeFrame struct {
	code   uint16
	reason []byte
}

// Close codes.
const (
	CloseNormal    = 0
	CloseProtocol  = 1 // the peer broke the protocol
	CloseIdle      = 2
	CloseShutdown  = 3
	CloseTooMany   = 4 // the server has no room for another session
	CloseBadDevice = 5 // sealed mode: unknown device or bad key
)

// parseAck decodes an ACK frame (type byte included) and returns the rest.
func parseAck(b []byte, f *ackFrame) ([]byte, error) {
	if len(b) < ackFixedLen {
		return nil, ErrMalformed
	}
	f.cum = binary.BigEndian.Uint32(b[1:5])
	f.delay = binary.BigEndian.Uint16(b[5:7])
	f.window = binary.BigEndian.Uint16(b[7:9])
	f.n = int(b[9])
	b = b[ackFixedLen:]
	if f.n > MaxSACKRanges || len(b) < f.n*sackRangeLen {
		return nil, ErrMalformed
	}
	prev := f.cum
	var span uint32
	for i := 0; i < f.n; i++ {
		gap := uint32(binary.BigEndian.Uint16(b[0:2]))
		length := uint32(binary.BigEndian.Uint16(b[2:4]))
		b = b[sackRangeLen:]
		if gap == 0 || length == 0 {
			return nil, ErrMalformed
		}
		span += gap + length
		if span >= 1<<30 {
			return nil, ErrMalformed
		}
		start := prev + gap
		f.ranges[i] = sackRange{start, start + length}
		prev = start + length
	}
	return b, nil
}

// appendAck encodes f.
func appendAck(b []byte, f *ackFrame) []byte {
	b = append(b, frameAck)
	b = binary.BigEndian.AppendUint32(b, f.cum)
	b = binary.BigEndian.AppendUint16(b, f.delay)
	b = binary.BigEndian.AppendUint16(b, f.window)
	b = append(b, byte(f.n))
	prev := f.cum
	for _, r := range f.ranges[:f.n] {
		b = binary.BigEndian.AppendUint16(b, uint16(r.start-prev))
		b = binary.BigEndian.AppendUint16(b, uint16(r.end-r.start))
		prev = r.end
	}
	return b
}

// parseData decodes a DATA frame. An empty fragment is only valid as a
// whole (empty) message.
func parseData(b []byte, f *dataFrame) ([]byte, error) {
	if len(b) < dataOverhead {
		return nil, ErrMalformed
	}
	f.flags = b[0] & (fragFirst | fragLast)
	f.seq = binary.BigEndian.Uint32(b[1:5])
	n := int(binary.BigEndian.Uint16(b[5:7]))
	b = b[dataOverhead:]
	if n > len(b) || n == 0 && f.flags != fragFirst|fragLast {
		return nil, ErrMalformed
	}
	f.data = b[:n:n]
	return b[n:], nil
}

// appendData encodes a DATA frame.
func appendData(b []byte, seq uint32, flags byte, data []byte) []byte {
	b = append(b, frameData|flags)
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

// parseDatagram decodes a DATAGRAM frame.
func parseDatagram(b []byte) (data, rest []byte, err error) {
	if len(b) < datagramOverhead {
		return nil, nil, ErrMalformed
	}
	n := int(binary.BigEndian.Uint16(b[1:3]))
	b = b[datagramOverhead:]
	if n > len(b) {
		return nil, nil, ErrMalformed
	}
	return b[:n:n], b[n:], nil
}

// appendDatagram encodes a DATAGRAM frame.
func appendDatagram(b, data []byte) []byte {
	b = append(b, frameDatagram)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

// parseHello decodes a HELLO frame.
func parseHello(b []byte, f *helloFrame) ([]byte, error) {
	const fixed = 1 + 2 + 2 + 4 + 4 + 1
	if len(b) < fixed {
		return nil, ErrMalformed
	}
	f.maxDatagram = binary.BigEndian.Uint16(b[1:3])
	f.window = binary.BigEndian.Uint16(b[3:5])
	f.maxMessage = binary.BigEndian.Uint32(b[5:9])
	f.idleMillis = binary.BigEndian.Uint32(b[9:13])
	n := int(b[13])
	b = b[fixed:]
	if n != 0 && n != cookieLen || len(b) < n+1 {
		return nil, ErrMalformed
	}
	f.cookie = b[:n:n]
	b = b[n:]
	n = int(b[0])
	b = b[1:]
	if n > MaxDeviceID || len(b) < n {
		return nil, ErrMalformed
	}
	f.deviceID = b[:n:n]
	return b[n:], nil
}

// appendHello encodes a HELLO frame.
func appendHello(b []byte, f *helloFrame) []byte {
	b = append(b, frameHello)
	b = binary.BigEndian.AppendUint16(b, f.maxDatagram)
	b = binary.BigEndian.AppendUint16(b, f.window)
	b = binary.BigEndian.AppendUint32(b, f.maxMessage)
	b = binary.BigEndian.AppendUint32(b, f.idleMillis)
	b = append(b, byte(len(f.cookie)))
	b = append(b, f.cookie...)
	b = append(b, byte(len(f.deviceID)))
	return append(b, f.deviceID...)
}

// parseRetry decodes a RETRY frame: the cookie.
func parseRetry(b []byte) (cookie, rest []byte, err error) {
	if len(b) < 2 || int(b[1]) != cookieLen || len(b) < 2+cookieLen {
		return nil, nil, ErrMalformed
	}
	return b[2 : 2+cookieLen : 2+cookieLen], b[2+cookieLen:], nil
}

// appendRetry encodes a RETRY frame.
func appendRetry(b, cookie []byte) []byte {
	b = append(b, frameRetry, byte(len(cookie)))
	return append(b, cookie...)
}

// parseAccept decodes an ACCEPT frame.
func parseAccept(b []byte, f *acceptFrame) ([]byte, error) {
	if len(b) < acceptLen {
		return nil, ErrMalformed
	}
	f.nonce = binary.BigEndian.Uint64(b[1:9])
	f.maxDatagram = binary.BigEndian.Uint16(b[9:11])
	f.window = binary.BigEndian.Uint16(b[11:13])
	f.maxMessage = binary.BigEndian.Uint32(b[13:17])
	f.idleMillis = binary.BigEndian.Uint32(b[17:21])
	f.keepaliveMillis = binary.BigEndian.Uint32(b[21:25])
	return b[acceptLen:], nil
}

// appendAccept encodes an ACCEPT frame.
func appendAccept(b []byte, f *acceptFrame) []byte {
	b = append(b, frameAccept)
	b = binary.BigEndian.AppendUint64(b, f.nonce)
	b = binary.BigEndian.AppendUint16(b, f.maxDatagram)
	b = binary.BigEndian.AppendUint16(b, f.window)
	b = binary.BigEndian.AppendUint32(b, f.maxMessage)
	b = binary.BigEndian.AppendUint32(b, f.idleMillis)
	return binary.BigEndian.AppendUint32(b, f.keepaliveMillis)
}

// parsePath decodes a PATH_CHALLENGE or PATH_RESPONSE frame.
func parsePath(b []byte) (value uint64, rest []byte, err error) {
	if len(b) < pathFrameLen {
		return 0, nil, ErrMalformed
	}
	return binary.BigEndian.Uint64(b[1:9]), b[pathFrameLen:], nil
}

// appendPath encodes a PATH_CHALLENGE or PATH_RESPONSE frame.
func appendPath(b []byte, typ byte, value uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, typ), value)
}

// parseClose decodes a CLOSE frame.
func parseClose(b []byte, f *closeFrame) ([]byte, error) {
	if len(b) < 4 {
		return nil, ErrMalformed
	}
	f.code = binary.BigEndian.Uint16(b[1:3])
	n := int(b[3])
	b = b[4:]
	if len(b) < n {
		return nil, ErrMalformed
	}
	f.reason = b[:n:n]
	return b[n:], nil
}

// appendClose encodes a CLOSE frame; the reason is cut to MaxCloseReason.
func appendClose(b []byte, code uint16, reason string) []byte {
	if len(reason) > MaxCloseReason {
		reason = reason[:MaxCloseReason]
	}
	b = append(b, frameClose)
	b = binary.BigEndian.AppendUint16(b, code)
	b = append(b, byte(len(reason)))
	return append(b, reason...)
}

// parseAuth decodes an AUTH frame, which must end the frames.
func parseAuth(b []byte) (mac, rest []byte, err error) {
	if len(b) != 1+authLen {
		return nil, nil, ErrMalformed
	}
	return b[1:], nil, nil
}

// frame is any decoded frame; typ says which field holds it.
type frame struct {
	typ    byte
	ack    ackFrame
	data   dataFrame
	hello  helloFrame
	accept acceptFrame
	close  closeFrame
	bytes  []byte // DATAGRAM payload, RETRY cookie, AUTH MAC
	value  uint64 // PATH_CHALLENGE, PATH_RESPONSE
}

// parseFrame decodes the frame at the start of b and returns the rest.
func parseFrame(b []byte, f *frame) (rest []byte, err error) {
	f.typ = b[0]
	switch {
	case f.typ == framePadding || f.typ == framePing:
		return b[1:], nil
	case f.typ == frameAck:
		return parseAck(b, &f.ack)
	case f.typ == frameDatagram:
		f.bytes, rest, err = parseDatagram(b)
		return rest, err
	case f.typ == frameHello:
		return parseHello(b, &f.hello)
	case f.typ == frameRetry:
		f.bytes, rest, err = parseRetry(b)
		return rest, err
	case f.typ == frameAccept:
		return parseAccept(b, &f.accept)
	case f.typ == framePathChallenge || f.typ == framePathResponse:
		f.value, rest, err = parsePath(b)
		return rest, err
	case f.typ == frameClose:
		return parseClose(b, &f.close)
	case f.typ == frameAuth:
		f.bytes, rest, err = parseAuth(b)
		return rest, err
	case f.typ&^(fragFirst|fragLast) == frameData:
		f.typ = frameData
		return parseData(b, &f.data)
	}
	return nil, ErrMalformed
}

// allowedFrames is, per packet type, a bitmap of the frame types it may
// carry (DATA frames as bit frameData).
var allowedFrames = [...]uint32{
	TypeInitial:   1<<framePadding | 1<<frameHello | 1<<frameAuth,
	TypeRetry:     1<<framePadding | 1<<frameRetry,
	TypeHandshake: 1<<framePadding | 1<<frameAccept,
	TypeData: 1<<framePadding | 1<<framePing | 1<<frameAck | 1<<frameDatagram |
		1<<framePathChallenge | 1<<framePathResponse | 1<<frameClose | 1<<frameData,
}

// checkFrames checks, without acting on them, that the frames b of a
// packet of type typ are well-formed and allowed there: the handshake
// packets carry their one HELLO, RETRY or ACCEPT frame exactly once, and
// an AUTH frame only last.
func checkFrames(typ PacketType, b []byte) error {
	if int(typ) >= len(allowedFrames) || allowedFrames[typ] == 0 {
		return ErrType
	}
	var f frame
	required := 0
	for len(b) > 0 {
		rest, err := parseFrame(b, &f)
		if err != nil {
			return err
		}
		if allowedFrames[typ]&(1<<f.typ) == 0 {
			return ErrFrameType
		}
		if f.typ == frameHello || f.typ == frameRetry || f.typ == frameAccept {
			required++
		}
		b = rest
	}
	if typ != TypeData && required != 1 {
		return ErrMalformed
	}
	return nil
}
