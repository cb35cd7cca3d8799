package wire

import (
	"encoding/binary"
	"fmt"
)

// AppendMBAP appends the Modbus TCP frame of pdu for unit with
// transaction id tid.
func AppendMBAP(dst []byte, tid uint16, unit byte, pdu []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, tid)
	dst = append(dst, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(pdu)+1))
	dst = append(dst, unit)
	return append(dst, pdu...)
}

// ParseMBAP reads the Modbus TCP frame at the start of p: transaction id,
// unit, PDU (aliasing p) and its length n. n == 0 with no error means more
// bytes are needed; an error means the stream cannot be resynchronised
// (a protocol id other than 0, a length outside 2..254).
func ParseMBAP(p []byte) (tid uint16, unit byte, pdu []byte, n int, err error) {
	if len(p) >= 4 && binary.BigEndian.Uint16(p[2:]) != 0 {
		return 0, 0, nil, 0, ErrProtocol
	}
	if len(p) < 6 {
		return 0, 0, nil, 0, nil
	}
	length := int(binary.BigEndian.Uint16(p[4:]))
	if length < 2 || length > MaxPDU+1 {
		return 0, 0, nil, 0, fmt.Errorf("%w: MBAP length %d", ErrLength, length)
	}
	n = 6 + length
	if len(p) < n {
		return 0, 0, nil, 0, nil
	}
	return binary.BigEndian.Uint16(p), p[6], p[MBAPHeader:n], n, nil
}
