package sniff

// CoAP over TCP (RFC 8323 section 3.2): byte 0 holds Len (high nibble) and
// TKL (low nibble); Len 13, 14 and 15 announce 1, 2 or 4 extended length
// bytes; then comes the code byte. The first message a peer sends on a
// connection must be a CSM (7.01).
const (
	coapCSM          = 0xE1    // code 7.01, Capabilities and Settings
	coapMaxTKL       = 8       // token lengths 9..15 are reserved
	coapTCPMaxLength = 1 << 20 // options and payload of a first message, at most
)

// DetectCoAPTCP recognises a CoAP-over-TCP CSM: a valid token length, a
// declared length of at most 1 MiB and the code 7.01. It matches on the code
// byte, without waiting for the options.
func DetectCoAPTCP(p []byte) (Verdict, int) {
	if len(p) == 0 {
		return NeedMore, 2
	}
	lenNibble, tkl := p[0]>>4, p[0]&0x0f
	if tkl > coapMaxTKL {
		return No, 0
	}
	extLen := coapTCPExtLenBytes(lenNibble)
	codeAt := 1 + extLen
	// Bytes still missing count as zero, so this is the smallest length the
	// message can still declare: once it is over the limit, it stays over.
	if coapTCPMinLength(lenNibble, p[1:min(len(p), codeAt)], extLen) > coapTCPMaxLength {
		return No, 0
	}
	if len(p) <= codeAt {
		return NeedMore, codeAt + 1
	}
	if p[codeAt] != coapCSM {
		return No, 0
	}
	return Match, 0
}

// coapTCPExtLenBytes is how many extended length bytes a Len nibble announces.
func coapTCPExtLenBytes(lenNibble byte) int {
	switch lenNibble {
	case 13:
		return 1
	case 14:
		return 2
	case 15:
		return 4
	}
	return 0
}

// coapTCPMinLength decodes the declared length of options and payload from
// the Len nibble and the extended bytes present in ext (want of them in
// all); absent low-order bytes count as zero.
func coapTCPMinLength(lenNibble byte, ext []byte, want int) uint64 {
	var v uint64
	for i := 0; i < want; i++ {
		v <<= 8
		if i < len(ext) {
			v |= uint64(ext[i])
		}
	}
	switch lenNibble {
	case 13:
		return v + 13
	case 14:
		return v + 269
	case 15:
		return v + 65805
	}
	return uint64(lenNibble)
}
