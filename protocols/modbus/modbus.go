// Package modbus serves Modbus TCP masters on the gateway's shared port from
// a register map over the topic bus: each configured tag is a bus topic
// seen as coils, discrete inputs, input registers or holding registers.
// A master reads the tags' last values (function codes 1-4) and writes
// the writable ones (5, 6, 15, 16), which publishes the new value on the
// bus, so a PLC and a dashboard see each other's data.
//
// The codec (pdu.go) is pure and written from the Modbus Application
// Protocol v1.1b3 and the Modbus TCP guide: every request is checked for
// its function's limits and answered with the protocol's own exception
// when it is wrong; a broken MBAP header, which has no exception, closes
// the connection. The session runs on the worker that owns the connection,
// with no goroutine of its own, and answers pipelined requests in order.
//
// Gateway mode (forward.go): a request for a unit id that
// modbus.upstream maps to a device goes to that device through
// protocols/modbus/upstream and its answer comes back in request order.
// Dial-in devices (dialin.go): a silent peer probed at the sniff deadline
// is identified by its answer and becomes its dial-in line's connection.
package modbus

import (
	"errors"

	"github.com/edgemux/edgemux/protocols/modbus/wire"
)

// Errors a session gives its worker for closing. All mean a misbehaving
// peer and wrap protocols.ErrMalformed too.
var (
	// ErrProtocolID: the MBAP protocol id is not 0 (not Modbus).
	ErrProtocolID = errors.New("modbus: protocol id is not 0")
	// ErrLength: the MBAP length is outside 2..254.
	ErrLength = errors.New("modbus: MBAP length out of range")
)

// Source is the name the handler publishes under (bus.Message.Src).
const Source = "modbus"

// The words of modbus.no_value: what a read of a tag with no current
// value gets ("" means the default, NoValueException).
const (
	NoValueException = "exception" // exception 0x0B
	NoValueZero      = "zero"      // 0, as if the value were 0
)

// Function codes served: the ones package wire frames for the master side.
const (
	ReadCoils              = wire.ReadCoils
	ReadDiscreteInputs     = wire.ReadDiscreteInputs
	ReadHoldingRegisters   = wire.ReadHoldingRegisters
	ReadInputRegisters     = wire.ReadInputRegisters
	WriteSingleCoil        = wire.WriteSingleCoil
	WriteSingleRegister    = wire.WriteSingleRegister
	WriteMultipleCoils     = wire.WriteMultipleCoils
	WriteMultipleRegisters = wire.WriteMultipleRegisters
)

// Exception codes (Modbus Application Protocol §7).
const (
	IllegalFunction     = 0x01
	IllegalDataAddress  = 0x02
	IllegalDataValue    = 0x03
	ServerDeviceFailure = 0x04
	// ServerDeviceBusy answers a write to a polled tag whose device has
	// too many writes waiting: the master should retry later.
	ServerDeviceBusy       = 0x06
	GatewayPathUnavailable = 0x0A
	// GatewayTargetFailed (gateway target device failed to respond)
	// answers a read of a tag with no current value: never published, or
	// older than modbus.max_age. A value that is not there is not zero.
	GatewayTargetFailed = 0x0B
)
