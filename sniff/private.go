package sniff

// The private protocol's frame header starts with two magic bytes (the
// rest of its 12 bytes: version, type, payload length, CRC32C).
// protocols/private defines the same values.
const (
	Magic0 = 0xE3
	Magic1 = 0x4D // ASCII 'M'
)

// privateNeed is how many bytes DetectPrivate needs to match: the magic.
const privateNeed = 2

// DetectPrivate recognises the private protocol by its magic alone. The
// rest of the first frame (version, type, length, CRC, and whether it is a
// HELLO) is the handler's to check: the protocol answers a bad first frame
// with an ERROR frame in its own words (BAD_VERSION, BAD_CRC,
// NOT_HELLO_FIRST...) before it closes, and only the handler can send that.
// Detect tries Modbus first, so a Modbus request whose transaction id
// happens to be E3 4D is not taken for a private frame.
func DetectPrivate(p []byte) (Verdict, int) {
	if len(p) > 0 && p[0] != Magic0 || len(p) > 1 && p[1] != Magic1 {
		return No, 0
	}
	if len(p) < privateNeed {
		return NeedMore, privateNeed
	}
	return Match, 0
}
