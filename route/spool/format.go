package spool

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// On disk a queue is a directory of segment files, each named after the
// seq of its first record (16 hex digits + ".seg"), plus a cursor file and
// a lock file. A segment is a 16-byte header (segMagic, then its first
// seq) followed by records, each a 24-byte header and its data:
//
//	crc  uint32  crc32c (Castagnoli) of the rest of the header and the data
//	len  uint32  data length
//	seq  uint64  the record's seq: the previous record's + 1 in a segment
//	time int64   when it was appended, Unix nanoseconds
//
// All little-endian. The seq check is what makes a zero-filled tail (what
// ext4 can leave after a crash: the size grew, the data did not land) end
// the valid log even where a CRC of zeros happened to match.
const (
	segHeaderSize = 16
	recHeaderSize = 24
	segMagic      = "EMXSPL01"
	segSuffix     = ".seg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recHeader is a decoded record header.
type recHeader struct {
	crc  uint32
	len  uint32
	seq  uint64
	time int64
}

// putRecHeader frames a record: it fills b[:recHeaderSize] for data.
func putRecHeader(b []byte, seq uint64, unixNano int64, data []byte) {
	binary.LittleEndian.PutUint32(b[4:], uint32(len(data)))
	binary.LittleEndian.PutUint64(b[8:], seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(unixNano))
	crc := crc32.Update(0, castagnoli, b[4:recHeaderSize])
	binary.LittleEndian.PutUint32(b[0:], crc32.Update(crc, castagnoli, data))
}

func parseRecHeader(b []byte) recHeader {
	return recHeader{
		crc:  binary.LittleEndian.Uint32(b[0:]),
		len:  binary.LittleEndian.Uint32(b[4:]),
		seq:  binary.LittleEndian.Uint64(b[8:]),
		time: int64(binary.LittleEndian.Uint64(b[16:])),
	}
}

// recordCRC is the CRC a record with header b and data should carry.
func recordCRC(b []byte, data []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, b[4:recHeaderSize]), castagnoli, data)
}

func putSegHeader(b []byte, first uint64) {
	copy(b, segMagic)
	binary.LittleEndian.PutUint64(b[8:], first)
}

// segHeaderOK reports whether b is the header of the segment named first.
func segHeaderOK(b []byte, first uint64) bool {
	return len(b) >= segHeaderSize && string(b[:8]) == segMagic &&
		binary.LittleEndian.Uint64(b[8:]) == first
}

func segName(first uint64) string { return fmt.Sprintf("%016x%s", first, segSuffix) }

// parseSegName returns the first seq a segment file name carries.
func parseSegName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	first, err := strconv.ParseUint(hex, 16, 64)
	return first, err == nil && first > 0
}

// The cursor file holds the highest seq acked or dropped: 8 bytes of
// cursorMagic, the seq, and a crc32c of both.
const (
	cursorFile  = "cursor"
	cursorSize  = 20
	cursorMagic = "EMXCUR01"
)

func putCursor(b []byte, seq uint64) {
	copy(b, cursorMagic)
	binary.LittleEndian.PutUint64(b[8:], seq)
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
}

func parseCursor(b []byte) (uint64, bool) {
	if len(b) != cursorSize || string(b[:8]) != cursorMagic ||
		binary.LittleEndian.Uint32(b[16:]) != crc32.Checksum(b[:16], castagnoli) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), true
}
