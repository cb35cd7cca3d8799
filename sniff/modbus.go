package sniff

// Modbus TCP framing (MBAP header): transaction id (2), protocol id (2, zero),
// length (2, counting the unit id and the PDU), unit id (1), then the PDU,
// whose first byte is the function code.
const (
	modbusNeed      = 8   // MBAP header and function code
	modbusMinLength = 2   // unit id and function code
	modbusMaxLength = 254 // unit id and the largest PDU (253)
)

// DetectModbus recognises a well-formed Modbus TCP request header: protocol
// id 0, a length of 2..254, any unit id and a function code of 1..127. It
// does not judge the function code further: a master that sends one the
// server does not serve (0x41, or 0x09) is owed exception 01 (illegal
// function) from the Modbus handler, not a silent close. It says No as soon
// as the bytes it has rule Modbus out, and needs 8 bytes to Match.
func DetectModbus(p []byte) (Verdict, int) {
	// Bytes 2 and 3, the protocol id, must be zero; byte 4, the length's
	// high byte, must be zero since the length is at most 254.
	for i := 2; i <= 4 && i < len(p); i++ {
		if p[i] != 0 {
			return No, 0
		}
	}
	if len(p) > 5 && (p[5] < modbusMinLength || p[5] > modbusMaxLength) {
		return No, 0
	}
	if len(p) < modbusNeed {
		return NeedMore, modbusNeed
	}
	if !modbusRequestCode(p[7]) {
		return No, 0
	}
	return Match, 0
}

// modbusRequestCode reports whether fc can start a request: 1..127. Zero is
// no function, and 0x80|fc is an exception response, which a flow never
// starts with.
func modbusRequestCode(fc byte) bool {
	return fc >= 1 && fc <= 127
}
