package modbus

import (
	"encoding/binary"
	"fmt"
)

// MBAP header (Modbus TCP): transaction id (2), protocol id (2, zero),
// length (2: unit id plus PDU), unit id (1).
const (
	mbapSize = 7
	maxPDU   = 253 // so an ADU is at most 260 bytes
)

// Request limits per function (Modbus Application Protocol §6).
const (
	maxReadBits       = 2000
	maxReadRegisters  = 125
	maxWriteBits      = 1968
	maxWriteRegisters = 123
)

// ADU is one Modbus TCP request: its header and its PDU (function code
// and data), the PDU aliasing the input.
type ADU struct {
	Transaction uint16
	Unit        byte
	PDU         []byte
}

// ParseADU reads the ADU at the start of p. It returns n == 0 and no error
// while p holds only part of it; an error means the stream is not Modbus
// TCP and cannot be resynchronised.
func ParseADU(p []byte) (adu ADU, n int, err error) {
	if len(p) >= 4 && binary.BigEndian.Uint16(p[2:]) != 0 {
		return ADU{}, 0, ErrProtocolID
	}
	if len(p) < 6 {
		return ADU{}, 0, nil
	}
	length := int(binary.BigEndian.Uint16(p[4:]))
	if length < 2 || length > maxPDU+1 {
		return ADU{}, 0, fmt.Errorf("%w: %d", ErrLength, length)
	}
	n = 6 + length
	if len(p) < n {
		return ADU{}, 0, nil
	}
	return ADU{Transaction: binary.BigEndian.Uint16(p), Unit: p[6], PDU: p[mbapSize:n]}, n, nil
}

// Request is one decoded request PDU.
type Request struct {
	Function byte
	Address  uint16
	Quantity uint16 // bits or registers; 1 for the single writes
	Values   []byte // writes: the coil bytes or register words, aliasing the PDU
}

// ParseRequest decodes a request PDU. A request the server must refuse
// gives the exception code to answer with (IllegalFunction for a function
// not served, IllegalDataValue for a bad quantity, byte count or coil
// value, IllegalDataAddress for a range past 65535), and exception 0.
func ParseRequest(pdu []byte) (req Request, exception byte) {
	if len(pdu) == 0 {
		return Request{}, IllegalFunction
	}
	req.Function = pdu[0]
	data := pdu[1:]
	switch req.Function {
	case ReadCoils, ReadDiscreteInputs, ReadHoldingRegisters, ReadInputRegisters:
		if len(data) != 4 {
			return req, IllegalDataValue
		}
		req.Address, req.Quantity = binary.BigEndian.Uint16(data), binary.BigEndian.Uint16(data[2:])
		limit := uint16(maxReadRegisters)
		if req.Function == ReadCoils || req.Function == ReadDiscreteInputs {
			limit = maxReadBits
		}
		if req.Quantity < 1 || req.Quantity > limit {
			return req, IllegalDataValue
		}
	case WriteSingleCoil, WriteSingleRegister:
		if len(data) != 4 {
			return req, IllegalDataValue
		}
		req.Address, req.Quantity, req.Values = binary.BigEndian.Uint16(data), 1, data[2:4]
		if req.Function == WriteSingleCoil {
			if v := binary.BigEndian.Uint16(req.Values); v != 0xFF00 && v != 0x0000 {
				return req, IllegalDataValue
			}
		}
	case WriteMultipleCoils, WriteMultipleRegisters:
		if len(data) < 5 {
			return req, IllegalDataValue
		}
		req.Address, req.Quantity = binary.BigEndian.Uint16(data), binary.BigEndian.Uint16(data[2:])
		count, values := int(data[4]), data[5:]
		limit, want := uint16(maxWriteRegisters), 2*int(req.Quantity)
		if req.Function == WriteMultipleCoils {
			limit, want = maxWriteBits, (int(req.Quantity)+7)/8
		}
		if req.Quantity < 1 || req.Quantity > limit || count != want || len(values) != count {
			return req, IllegalDataValue
		}
		req.Values = values
	default:
		return req, IllegalFunction
	}
	if int(req.Address)+int(req.Quantity) > 1<<16 {
		return req, IllegalDataAddress
	}
	return req, 0
}

// appendHeader starts a response ADU to adu with a PDU of pduLen bytes.
func appendHeader(b []byte, adu ADU, pduLen int) []byte {
	b = binary.BigEndian.AppendUint16(b, adu.Transaction)
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(pduLen+1))
	return append(b, adu.Unit)
}

// AppendException appends the exception response to adu's request.
func AppendException(b []byte, adu ADU, function, code byte) []byte {
	b = appendHeader(b, adu, 2)
	return append(b, function|0x80, code)
}

// AppendReadResponse appends the response to a read: the function, the
// byte count and data (packed bits, or big-endian registers).
func AppendReadResponse(b []byte, adu ADU, function byte, data []byte) []byte {
	b = appendHeader(b, adu, 2+len(data))
	b = append(b, function, byte(len(data)))
	return append(b, data...)
}

// AppendWriteResponse appends the response to a write: the single writes
// echo address and value, the multiple writes address and quantity.
func AppendWriteResponse(b []byte, adu ADU, req Request) []byte {
	b = appendHeader(b, adu, 5)
	b = append(b, req.Function)
	b = binary.BigEndian.AppendUint16(b, req.Address)
	if req.Function == WriteSingleCoil || req.Function == WriteSingleRegister {
		return append(b, req.Values...)
	}
	return binary.BigEndian.AppendUint16(b, req.Quantity)
}
