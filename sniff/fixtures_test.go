package sniff

import (
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"io"
	"net"
	"strings"
	"testing"
)

// hx decodes a hex literal with spaces, as captures are usually printed.
// Fixtures are constants, so a typo is a programming error and panics.
func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic("bad hex fixture " + s + ": " + err.Error())
	}
	return b
}

// Captured-style first messages of each protocol.
var (
	// mbpoll -a 1 -r 1 -c 10 -t 4 127.0.0.1: read 10 holding registers.
	mbpollRead = hx("00 01 00 00 00 06 01 03 00 00 00 0a")
	// write single coil 2 ON, unit 1.
	modbusWriteCoil = hx("00 02 00 00 00 06 01 05 00 01 ff 00")
	// FC 43/14 read device identification.
	modbusDeviceID = hx("00 03 00 00 00 05 01 2b 0e 01 00")
	// a read whose transaction id 0x00E1 looks like a bare CoAP CSM.
	modbusTIDLikeCSM = hx("00 e1 00 00 00 06 11 04 00 10 00 02")

	curlGet = []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n")
	// Chromium's WebSocket opening handshake, trimmed.
	browserUpgrade = []byte("GET /ws HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: Upgrade\r\n" +
		"Pragma: no-cache\r\nUpgrade: websocket\r\nOrigin: http://127.0.0.1:8080\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	// Firefox lists keep-alive too.
	firefoxUpgrade = []byte("GET /ws HTTP/1.1\r\nHost: gw\r\nconnection: keep-alive, Upgrade\r\n" +
		"upgrade: WebSocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: x3JJHMbDL1EzLkh9GBhXDw==\r\n\r\n")

	// libcoap's CSM: Max-Message-Size 1152, Block-Wise-Transfer.
	libcoapCSM = hx("40 e1 22 04 80 20")
	// a CSM with no options and no token: two bytes.
	bareCSM = hx("00 e1")
	// a CSM with a 2-byte token and Max-Message-Size 1152.
	tokenCSM = hx("32 e1 ab cd 22 04 80")
	// a CSM with a 2-byte token and 13 bytes of options (Len 13, extended
	// length byte 0): Max-Message-Size, Block-Wise-Transfer, an elective
	// option 44 carrying "edgemux".
	extLenCSM = hx("d2 00 e1 ab cd 22 04 80 20 d7 1b 65 64 67 65 6d 75 78")
)

// The private protocol's header (protocols/private/SPEC.md section 1),
// for building fixtures; the detector itself only reads the magic.
const (
	privateVersion   = 1
	privateHeaderLen = 12
	privateHello     = 1 // frame types: HELLO, PUB, SUB, PING
	privatePub       = 2
	privateSub       = 3
	privatePing      = 5
)

// castagnoli is the CRC32C table of the private protocol's frames.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// privateFrame builds a private-protocol frame of version v with a correct
// CRC32C (over the first 8 header bytes, then the payload).
func privateFrame(v, typ byte, payload []byte) []byte {
	frame := make([]byte, privateHeaderLen, privateHeaderLen+len(payload))
	frame[0], frame[1], frame[2], frame[3] = Magic0, Magic1, v, typ
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(payload)))
	sum := crc32.Update(crc32.Update(0, castagnoli, frame[:8]), castagnoli, payload)
	binary.BigEndian.PutUint32(frame[8:12], sum)
	return append(frame, payload...)
}

// Private first frames: a good HELLO, and the bad first frames the handler
// (not the sniffer) must answer with an ERROR.
var (
	// HELLO from device dev1, keepalive 30 s (SPEC section 7).
	privateHelloFrame = hx("e3 4d 01 01 00 00 00 09 75 8d 2b 1d 00 04 64 65 76 31 00 1e 00")
	// PUB msg id 7 to a/b, data "hi" (SPEC section 7): ERROR 6.
	privatePubFirst = hx("e3 4d 01 02 00 00 00 15 6c 7d fd 6f 00 00 00 07 00 00 03 61 2f 62 " +
		"00 00 00 00 00 00 00 00 00 68 69")
	// SUB msg id 1 to a/# (SPEC section 7): ERROR 6.
	privateSubFirst = hx("e3 4d 01 03 00 00 00 09 76 6c 7f 63 00 00 00 01 00 03 61 2f 23")
	// PING with a 2-byte token: ERROR 6.
	privatePingFirst = privateFrame(privateVersion, privatePing, []byte{1, 2})
	// the HELLO with one payload bit flipped: ERROR 2 (BAD_CRC).
	privateBadCRC = corrupt(privateHelloFrame, privateHeaderLen+3)
	// the HELLO as version 2: ERROR 3 (BAD_VERSION).
	privateVersion2 = privateFrame(2, privateHello, privateHelloFrame[privateHeaderLen:])
	// the header of a HELLO declaring 16 MiB: ERROR 4 (FRAME_TOO_LARGE).
	privateHugeHello = hx("e3 4d 01 01 01 00 00 00 00 00 00 00")
)

// captureClientHello runs crypto/tls's client against a net.Pipe and
// returns the first TLS record it writes: a real Go ClientHello.
func captureClientHello(tb testing.TB, serverName string) []byte {
	tb.Helper()
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn := tls.Client(client, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
		_ = conn.Handshake() // fails once the server side closes; only its bytes matter
		_ = client.Close()
	}()
	header := make([]byte, tlsRecordHeaderLen)
	if _, err := io.ReadFull(server, header); err != nil {
		tb.Fatalf("reading record header: %v", err)
	}
	body := make([]byte, int(header[3])<<8|int(header[4]))
	if _, err := io.ReadFull(server, body); err != nil {
		tb.Fatalf("reading record body: %v", err)
	}
	_ = server.Close()
	<-done
	return append(header, body...)
}

// refragment re-splits a single-record ClientHello into records whose
// payloads are at most size bytes.
func refragment(record []byte, size int) []byte {
	payload := record[tlsRecordHeaderLen:]
	var out []byte
	for len(payload) > 0 {
		n := min(size, len(payload))
		out = append(out, tlsRecordHandshake, 3, 1, byte(n>>8), byte(n))
		out = append(out, payload[:n]...)
		payload = payload[n:]
	}
	return out
}

// clientHelloRecord builds a minimal TLS 1.2 style ClientHello record with
// the given extensions block (nil: no extensions field at all).
func clientHelloRecord(extensions []byte) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 0)                   // session id
	body = append(body, 0, 2, 0x13, 0x01)    // one cipher suite
	body = append(body, 1, 0)                // null compression
	if extensions != nil {
		body = append(body, byte(len(extensions)>>8), byte(len(extensions)))
		body = append(body, extensions...)
	}
	msg := append([]byte{tlsHandshakeClient, 0, byte(len(body) >> 8), byte(len(body))}, body...)
	return append([]byte{tlsRecordHandshake, 3, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// extension encodes one TLS extension.
func extension(typ uint16, data []byte) []byte {
	return append([]byte{byte(typ >> 8), byte(typ), byte(len(data) >> 8), byte(len(data))}, data...)
}

// sniData encodes a server_name extension body with host_name entries.
func sniData(names ...string) []byte {
	var list []byte
	for _, n := range names {
		list = append(list, 0, byte(len(n)>>8), byte(len(n)))
		list = append(list, n...)
	}
	return append([]byte{byte(len(list) >> 8), byte(len(list))}, list...)
}
