package sniff

// DatagramClass is what a UDP datagram on the shared port carries.
type DatagramClass uint8

// The datagram classes.
const (
	DatagramUnknown DatagramClass = iota
	DatagramCoAP                  // CoAP over UDP, RFC 7252
	DatagramRUDP                  // a frame of edgemux's reliable UDP core
)

var datagramNames = [...]string{DatagramUnknown: "unknown", DatagramCoAP: "coap", DatagramRUDP: "rudp"}

// String returns "unknown", "coap" or "rudp" ("invalid" otherwise).
func (c DatagramClass) String() string {
	if int(c) < len(datagramNames) {
		return datagramNames[c]
	}
	return "invalid"
}

// The reliable UDP core's frames start with these two bytes and carry a
// 16-byte header. A CoAP datagram can never start with 0xE3: its top two
// bits would be version 3.
const (
	RUDPMagic0    = 0xE3
	RUDPMagic1    = 0x55
	RUDPHeaderLen = 16
)

// coapUDPHeaderLen is CoAP's fixed header over UDP: Ver/T/TKL, code, message id.
const coapUDPHeaderLen = 4

// ClassifyDatagram tells CoAP from RUDP by the datagram's first bytes and
// structure; anything else, truncated or malformed, is DatagramUnknown. It
// does not allocate.
func ClassifyDatagram(b []byte) DatagramClass {
	switch {
	case len(b) >= RUDPHeaderLen && b[0] == RUDPMagic0 && b[1] == RUDPMagic1:
		return DatagramRUDP
	case coapDatagram(b):
		return DatagramCoAP
	}
	return DatagramUnknown
}

// coapDatagram checks a CoAP-over-UDP message (RFC 7252 section 3): version
// 1, TKL <= 8, room for the token, a code of class 0 (requests; 0.00 only as
// a bare 4-byte Empty message), 2, 4 or 5, and well-formed options with a
// payload marker followed by a payload.
func coapDatagram(b []byte) bool {
	if len(b) < coapUDPHeaderLen {
		return false
	}
	version, tkl := b[0]>>6, int(b[0]&0x0f)
	if version != 1 || tkl > coapMaxTKL || len(b) < coapUDPHeaderLen+tkl {
		return false
	}
	code := b[1]
	switch code >> 5 {
	case 0:
		if code == 0 {
			return tkl == 0 && len(b) == coapUDPHeaderLen
		}
	case 2, 4, 5:
	default:
		return false // classes 1, 3, 6 and 7 are reserved over UDP
	}
	return coapOptionsOK(b[coapUDPHeaderLen+tkl:])
}

// coapOptionsOK walks CoAP options (RFC 7252 section 3.1) to the end or to
// the payload marker. Nibble 15 is reserved except in the marker itself, and
// a marker must be followed by at least one payload byte.
func coapOptionsOK(b []byte) bool {
	for i := 0; i < len(b); {
		if b[i] == 0xFF {
			return i+1 < len(b)
		}
		delta, length := b[i]>>4, b[i]&0x0f
		if delta == 15 || length == 15 {
			return false
		}
		i++
		deltaExt, lengthExt := coapOptionExtBytes(delta), coapOptionExtBytes(length)
		if i+deltaExt+lengthExt > len(b) {
			return false
		}
		i += deltaExt
		value := coapOptionExtValue(length, b[i:i+lengthExt])
		i += lengthExt + value
		if i > len(b) {
			return false
		}
	}
	return true
}

// coapOptionExtBytes is how many extended bytes an option nibble announces.
func coapOptionExtBytes(nibble byte) int {
	switch nibble {
	case 13:
		return 1
	case 14:
		return 2
	}
	return 0
}

// coapOptionExtValue decodes an option nibble and its extended bytes.
func coapOptionExtValue(nibble byte, ext []byte) int {
	switch nibble {
	case 13:
		return int(ext[0]) + 13
	case 14:
		return (int(ext[0])<<8 | int(ext[1])) + 269
	}
	return int(nibble)
}
