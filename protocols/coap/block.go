package coap

import "errors"

// Block-wise transfers (RFC 7959). A Block1 or Block2 option value packs
// the block number, the More flag and the size exponent SZX (size = 2 **
// (SZX + 4), 16..1024) into 0 to 3 bytes.

// errBlock is a Block option that cannot be read: too long, or the SZX 7
// that only BERT over TCP uses (RFC 8323 section 6), which we do not
// offer.
var errBlock = errors.New("coap: bad block option")

// maxBlockNum is the largest block number a 3-byte option carries.
const maxBlockNum = 1<<20 - 1

// block is one Block1 or Block2 option.
type block struct {
	num  uint32
	more bool
	szx  uint8
}

// size is the block's payload size in bytes.
func (b block) size() int { return 1 << (b.szx + 4) }

// parseBlock reads an option value.
func parseBlock(v []byte) (block, error) {
	u, ok := decodeUint(v)
	if !ok || len(v) > 3 {
		return block{}, errBlock
	}
	b := block{num: u >> 4, more: u&0x8 != 0, szx: uint8(u & 0x7)}
	if b.szx == 7 {
		return block{}, errBlock
	}
	return b, nil
}

// value is the option's encoding, appended to dst.
func (b block) value(dst []byte) []byte {
	v := b.num<<4 | uint32(b.szx)
	if b.more {
		v |= 0x8
	}
	return appendUint(dst, v)
}

// szxOf is the SZX of a block size (a power of two, 16..1024).
func szxOf(size int) uint8 {
	var szx uint8
	for s := 16; s < size && szx < 6; s <<= 1 {
		szx++
	}
	return szx
}

// appendUint appends v in the fewest bytes, big-endian (RFC 7252 section
// 3.2: 0 is the empty value).
func appendUint(dst []byte, v uint32) []byte {
	switch {
	case v == 0:
		return dst
	case v < 1<<8:
		return append(dst, byte(v))
	case v < 1<<16:
		return append(dst, byte(v>>8), byte(v))
	case v < 1<<24:
		return append(dst, byte(v>>16), byte(v>>8), byte(v))
	}
	return append(dst, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// decodeUint reads a uint option value of up to 4 bytes.
func decodeUint(v []byte) (uint32, bool) {
	if len(v) > 4 {
		return 0, false
	}
	var u uint32
	for _, c := range v {
		u = u<<8 | uint32(c)
	}
	return u, true
}
