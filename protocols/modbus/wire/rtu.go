package wire

import (
	"encoding/binary"
	"fmt"
	"time"
)

// crcTable is the CRC-16/MODBUS table (polynomial 0xA001, reflected).
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xA001
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}()

// CRC is the CRC-16/MODBUS of p.
func CRC(p []byte) uint16 {
	c := uint16(0xFFFF)
	for _, b := range p {
		c = c>>8 ^ crcTable[byte(c)^b]
	}
	return c
}

// AppendRTU appends the RTU frame of pdu for unit: unit, PDU, CRC (low
// byte first).
func AppendRTU(dst []byte, unit byte, pdu []byte) []byte {
	start := len(dst)
	dst = append(dst, unit)
	dst = append(dst, pdu...)
	return binary.LittleEndian.AppendUint16(dst, CRC(dst[start:]))
}

// RTUFrameLen is the length of the RTU response frame that starts p,
// read from its header: 5 for an exception, 8 for a write's echo, 5 plus
// the byte count for a read. It returns 0 while p is too short to say,
// and ErrFunction for a function whose length it cannot know.
func RTUFrameLen(p []byte) (int, error) {
	if len(p) < 2 {
		return 0, nil
	}
	fc := p[1]
	switch {
	case fc&0x80 != 0:
		return 5, nil
	case fc >= ReadCoils && fc <= ReadInputRegisters:
		if len(p) < 3 {
			return 0, nil
		}
		return 5 + int(p[2]), nil
	case fc == WriteSingleCoil || fc == WriteSingleRegister || fc == WriteMultipleCoils || fc == WriteMultipleRegisters:
		return 8, nil
	}
	return 0, fmt.Errorf("%w: %#x", ErrFunction, fc)
}

// ParseRTU reads the response frame at the start of p: its unit and PDU
// (aliasing p) and its length n. n == 0 with no error means more bytes
// are needed; ErrCRC means a whole frame arrived damaged (n is its length,
// so the caller can count it and skip it).
func ParseRTU(p []byte) (unit byte, pdu []byte, n int, err error) {
	n, err = RTUFrameLen(p)
	if err != nil || n == 0 || len(p) < n {
		return 0, nil, 0, err
	}
	if got, want := binary.LittleEndian.Uint16(p[n-2:]), CRC(p[:n-2]); got != want {
		return 0, nil, n, fmt.Errorf("%w: %#04x, computed %#04x", ErrCRC, got, want)
	}
	return p[0], p[1 : n-2], n, nil
}

// Timing is a serial line's RTU timing (Modbus over Serial Line v1.02,
// §2.5.1.1): the time of one character and the silences that end a frame
// (t3.5) and that may not occur inside one (t1.5). Above 19200 baud the
// silences are fixed at 1750 µs and 750 µs.
type Timing struct {
	Char, T15, T35 time.Duration
}

// LineTiming is the timing of a line at baud with bitsPerChar bits per
// character (start, data, parity, stop: 11 for 8E1 or 8N2, 10 for 8N1).
func LineTiming(baud, bitsPerChar int) Timing {
	if baud <= 0 {
		baud = 9600
	}
	if bitsPerChar <= 0 {
		bitsPerChar = 11
	}
	char := time.Duration(bitsPerChar) * time.Second / time.Duration(baud)
	t := Timing{Char: char, T15: char * 3 / 2, T35: char * 7 / 2}
	if baud > 19200 {
		t.T15, t.T35 = 750*time.Microsecond, 1750*time.Microsecond
	}
	return t
}

// ResponseTimeout is how long to wait for the response to an RTU request
// of reqLen bytes: the request's and the expected response's characters
// on the wire, a frame gap each, and the device's own margin (its
// processing time). An unknown response length counts as the largest frame.
func (t Timing) ResponseTimeout(reqLen int, reqPDU []byte, margin time.Duration) time.Duration {
	respLen := MaxRTU
	if n := ResponsePDULen(reqPDU); n > 0 {
		respLen = n + 3
	}
	return time.Duration(reqLen+respLen)*t.Char + 2*t.T35 + margin
}
