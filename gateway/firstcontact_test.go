package gateway

import (
	"bytes"
	"encoding/hex"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
)

// First contact: whatever a client's first bytes are, if they are its
// protocol's, the answer is in that protocol's words (an ERROR frame, an
// exception, an HTTP status), never a silent close by the sniffer.

// hexBytes decodes a spaced hex literal of a test table.
func hexBytes(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// readToEOF reads everything the gateway sends until it closes the
// connection (a reset after the data counts as a close too).
func readToEOF(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(rbIOTimeout))
	var out bytes.Buffer
	if _, err := io.Copy(&out, c); err != nil && !rbIsReset(err) {
		t.Fatalf("after % x: %v, want the gateway to close", out.Bytes(), err)
	}
	return out.Bytes()
}

// TestPrivateBadFirstFrameGetsError: a first frame with the private magic
// that is not a valid HELLO is answered with the ERROR code SPEC.md
// promises (sections 1 and 5), as the only frame, and then the close.
// Before, the sniffer closed all of these silently as no-match.
func TestPrivateBadFirstFrameGetsError(t *testing.T) {
	hello := "e3 4d 01 01 00 00 00 09 75 8d 2b 1d 00 04 64 65 76 31 00 1e 00" // SPEC section 7
	tests := []struct {
		name  string
		frame string
		want  private.Code
	}{
		{"spec pub example", "e3 4d 01 02 00 00 00 15 6c 7d fd 6f 00 00 00 07 00 00 03 61 2f 62 " +
			"00 00 00 00 00 00 00 00 00 68 69", private.CodeNotHelloFirst},
		{"spec sub example", "e3 4d 01 03 00 00 00 09 76 6c 7f 63 00 00 00 01 00 03 61 2f 23", private.CodeNotHelloFirst},
		{"ping", "", private.CodeNotHelloFirst},
		{"hello with a bad crc", strings.Replace(hello, "75 8d 2b 1d", "75 8d 2b 1e", 1), private.CodeBadCRC},
		{"hello version 2", "e3 4d 02" + hello[8:], private.CodeBadVersion},
		{"hello of 16 MiB", "e3 4d 01 01 01 00 00 00 00 00 00 00", private.CodeFrameTooLarge},
	}
	g := startGateway(t, rbConfig(t), Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := private.AppendFrame(nil, private.TypePing, []byte{1, 2})
			if tt.frame != "" {
				frame = hexBytes(t, tt.frame)
			}
			c := dial(t, g)
			if err := rbWrite(c, frame); err != nil {
				t.Fatal(err)
			}
			got := readToEOF(t, c)
			f, n, err := private.ParseFrame(got, 0)
			if err != nil || n == 0 || f.Type != private.TypeError {
				t.Fatalf("answer % x: frame %v, %d bytes, %v; want one ERROR frame", got, f.Type, n, err)
			}
			if n != len(got) {
				t.Errorf("answer % x: %d bytes after the ERROR frame", got, len(got)-n)
			}
			msg, err := private.DecodeError(f.Payload)
			if err != nil || msg.Code != tt.want {
				t.Errorf("ERROR %d %q (%v), want code %d", msg.Code, msg.Text, err, tt.want)
			}
		})
	}
	// The good HELLO still gets its ACK on the same gateway.
	c := dial(t, g)
	if err := rbWrite(c, hexBytes(t, hello)); err != nil {
		t.Fatal(err)
	}
	ack, err := rbReadFrame(c)
	if err != nil || ack.Type != private.TypeAck {
		t.Fatalf("HELLO answered with %v, %v; want ACK", ack.Type, err)
	}
}

// TestModbusUnservedFunctionGetsException: a first request with a
// function code the server does not serve reaches the Modbus handler and
// gets exception 01 (illegal function); the connection stays usable.
// Before, the sniffer listed only some codes and closed the rest.
func TestModbusUnservedFunctionGetsException(t *testing.T) {
	tests := []struct{ name, request, want string }{
		{"fc 0x41", "00 07 00 00 00 03 01 41 00", "00 07 00 00 00 03 01 c1 01"},
		{"fc 0x09", "00 08 00 00 00 02 11 09", "00 08 00 00 00 03 11 89 01"},
		{"fc 0x7f", "12 34 00 00 00 04 01 7f 01 02", "12 34 00 00 00 03 01 ff 01"},
	}
	g := startGateway(t, rbConfig(t), Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, g)
			if err := rbWrite(c, hexBytes(t, tt.request)); err != nil {
				t.Fatal(err)
			}
			want := hexBytes(t, tt.want)
			got := make([]byte, len(want))
			c.SetReadDeadline(time.Now().Add(rbIOTimeout))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("reading the exception: %v (got % x)", err, got)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("answer % x, want % x", got, want)
			}
			// The master may go on with the next request on the same
			// connection.
			if err := rbWrite(c, hexBytes(t, "00 09 00 00 00 02 01 41")); err != nil {
				t.Fatal(err)
			}
			next := make([]byte, 9)
			if _, err := io.ReadFull(c, next); err != nil || !bytes.Equal(next, hexBytes(t, "00 09 00 00 00 03 01 c1 01")) {
				t.Fatalf("second request: % x, %v", next, err)
			}
		})
	}
}
