package sniff

// TLS record layer: content type (1), legacy version (2), length (2); a
// ClientHello travels in handshake records whose first fragment starts with
// the handshake type.
const (
	tlsRecordHandshake  = 0x16
	tlsHandshakeClient  = 1 // handshake type ClientHello
	tlsRecordHeaderLen  = 5
	tlsMaxRecord        = 16384 + 2048 // TLSCiphertext limit, RFC 8446 5.2
	tlsMaxMinorVersion  = 4            // record versions 3.0 (SSL 3) .. 3.4 are accepted
	tlsDetectNeed       = tlsRecordHeaderLen + 1
	tlsHandshakeHdrLen  = 4 // type (1), length (3)
	tlsMaxClientHello   = 1 << 16
	tlsMaxServerNameLen = 255
)

// DetectTLS recognises the first record of a TLS ClientHello: content type
// handshake, version 3.0..3.4, a record length of 1..18432 and handshake type
// 1. It needs 6 bytes and says No as soon as a byte contradicts it.
func DetectTLS(p []byte) (Verdict, int) {
	if len(p) > 0 && p[0] != tlsRecordHandshake {
		return No, 0
	}
	if len(p) > 1 && p[1] != 3 {
		return No, 0
	}
	if len(p) > 2 && p[2] > tlsMaxMinorVersion {
		return No, 0
	}
	if len(p) > 3 && int(p[3])<<8 > tlsMaxRecord {
		return No, 0
	}
	if len(p) > 4 {
		if n := int(p[3])<<8 | int(p[4]); n == 0 || n > tlsMaxRecord {
			return No, 0
		}
	}
	if len(p) < tlsDetectNeed {
		return NeedMore, tlsDetectNeed
	}
	if p[5] != tlsHandshakeClient {
		return No, 0
	}
	return Match, 0
}
