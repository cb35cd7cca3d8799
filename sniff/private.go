package sniff

import (
	"encoding/binary"
	"hash/crc32"
)

// The private protocol's frame header, 12 bytes, big-endian: magic (2),
// version (1), type (1), payload length (4), CRC32C (4) over the first 8
// header bytes followed by the payload. protocols/private shares these.
const (
	Magic0           = 0xE3
	Magic1           = 0x4D
	PrivateVersion   = 1
	PrivateHello     = 1        // frame type HELLO, the only valid first frame
	PrivateHeaderLen = 12       // bytes in a frame header
	PrivateVerifyMax = 512      // whole frames up to this size get their CRC checked
	PrivateMaxFrame  = 16 << 20 // payload bytes a frame may declare, at most
)

// castagnoli is the CRC32C table; building it once keeps PrivateChecksum
// allocation-free.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// PrivateChecksum is a frame's CRC32C: over the first 8 bytes of header
// (magic, version, type, length) and then the payload. header must hold at
// least 8 bytes.
func PrivateChecksum(header, payload []byte) uint32 {
	sum := crc32.Update(0, castagnoli, header[:8])
	return crc32.Update(sum, castagnoli, payload)
}

// DetectPrivate recognises the private protocol's first frame, a HELLO.
// When the whole frame fits in PrivateVerifyMax bytes it waits for all of it
// and checks the CRC; a larger frame matches on a valid header alone.
// Lengths over PrivateMaxFrame say No.
func DetectPrivate(p []byte) (Verdict, int) {
	expected := [4]byte{Magic0, Magic1, PrivateVersion, PrivateHello}
	for i := 0; i < len(expected) && i < len(p); i++ {
		if p[i] != expected[i] {
			return No, 0
		}
	}
	if len(p) < 8 {
		return NeedMore, PrivateHeaderLen
	}
	size := binary.BigEndian.Uint32(p[4:8])
	if size > PrivateMaxFrame {
		return No, 0
	}
	total := PrivateHeaderLen + int(size)
	if total > PrivateVerifyMax {
		if len(p) < PrivateHeaderLen {
			return NeedMore, PrivateHeaderLen
		}
		return Match, 0
	}
	if len(p) < total {
		return NeedMore, total
	}
	if PrivateChecksum(p, p[PrivateHeaderLen:total]) != binary.BigEndian.Uint32(p[8:12]) {
		return No, 0
	}
	return Match, 0
}
