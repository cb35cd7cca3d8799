// Package wire is the pure framing of a Modbus master towards its devices:
// RTU frames (CRC-16, the length a response must have, read from its first
// bytes), MBAP frames (the transaction id that pairs a response with its
// request), and the RTU timing derived from a line's baud rate. No I/O:
// protocols/modbus/upstream does that over sockets and serial lines.
//
// It is ours rather than goburrow/modbus's packagers because those get
// RTU exception responses wrong (they expect a data response's length,
// goburrow #81), panic on frames under 6 bytes, and cannot tell a late
// response from the current one (#64).
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors of a response frame. ErrCRC is counted apart from timeouts.
var (
	ErrCRC      = errors.New("modbus: RTU CRC mismatch")
	ErrFunction = errors.New("modbus: function code not understood")
	ErrMismatch = errors.New("modbus: response does not match the request")
	ErrShort    = errors.New("modbus: frame too short")
	ErrLength   = errors.New("modbus: frame length out of range")
	ErrProtocol = errors.New("modbus: MBAP protocol id is not 0")
)

// Sizes from the Modbus specifications.
const (
	MaxPDU     = 253 // function code and data
	MaxRTU     = 256 // unit, PDU, CRC
	MBAPHeader = 7
	MaxMBAP    = MBAPHeader + MaxPDU
)

// Function codes a master sends.
const (
	ReadCoils              = 0x01
	ReadDiscreteInputs     = 0x02
	ReadHoldingRegisters   = 0x03
	ReadInputRegisters     = 0x04
	WriteSingleCoil        = 0x05
	WriteSingleRegister    = 0x06
	WriteMultipleCoils     = 0x0F
	WriteMultipleRegisters = 0x10
)

// IsWrite reports whether a request PDU writes (and so goes ahead of polls).
func IsWrite(pdu []byte) bool {
	if len(pdu) == 0 {
		return false
	}
	switch pdu[0] {
	case WriteSingleCoil, WriteSingleRegister, WriteMultipleCoils, WriteMultipleRegisters:
		return true
	}
	return false
}

// ResponsePDULen is the length of the normal response PDU to request pdu,
// or 0 when the function is not one whose answer length is known (the
// response is then framed by its own byte count, see RTUFrameLen).
func ResponsePDULen(pdu []byte) int {
	if len(pdu) < 5 {
		return 0
	}
	qty := int(binary.BigEndian.Uint16(pdu[3:]))
	switch pdu[0] {
	case ReadCoils, ReadDiscreteInputs:
		return 2 + (qty+7)/8
	case ReadHoldingRegisters, ReadInputRegisters:
		return 2 + 2*qty
	case WriteSingleCoil, WriteSingleRegister, WriteMultipleCoils, WriteMultipleRegisters:
		return 5
	}
	return 0
}

// CheckResponse checks that a response PDU answers request req: the same
// function (or its exception), the byte count a read asked for, the echo
// of a write. RTU has no transaction id, so this is what keeps a late
// answer to an earlier, different request from being taken for this one.
func CheckResponse(req, resp []byte) error {
	if len(resp) < 2 || len(req) < 1 {
		return ErrShort
	}
	if resp[0] == req[0]|0x80 {
		if len(resp) != 2 {
			return fmt.Errorf("%w: exception of %d bytes", ErrMismatch, len(resp))
		}
		return nil
	}
	if resp[0] != req[0] {
		return fmt.Errorf("%w: function %#x for %#x", ErrMismatch, resp[0], req[0])
	}
	if want := ResponsePDULen(req); want != 0 && len(resp) != want {
		return fmt.Errorf("%w: %d bytes, want %d", ErrMismatch, len(resp), want)
	}
	switch req[0] {
	case WriteSingleCoil, WriteSingleRegister:
		if string(resp[1:5]) != string(req[1:5]) {
			return fmt.Errorf("%w: write echo differs", ErrMismatch)
		}
	case WriteMultipleCoils, WriteMultipleRegisters:
		if string(resp[1:5]) != string(req[1:5]) {
			return fmt.Errorf("%w: write echo differs", ErrMismatch)
		}
	}
	return nil
}
