package rudp

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"slices"

	"golang.org/x/crypto/chacha20poly1305"
)

// Integrity trailers.
const (
	crcLen = 4
	tagLen = chacha20poly1305.Overhead
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendCRC appends the CRC-32C of b[start:] to b: a plain packet's trailer.
func appendCRC(b []byte, start int) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// checkCRC verifies a plain packet's trailer and returns the packet
// without it.
func checkCRC(p []byte) ([]byte, error) {
	if len(p) < HeaderLen+crcLen {
		return nil, ErrShort
	}
	body := p[:len(p)-crcLen]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(p[len(body):]) {
		return nil, ErrIntegrity
	}
	return body, nil
}

// aeadNonce is the 96-bit nonce of packet number pn: each direction of a
// session has its own key, so the number alone makes it unique. It lives
// in the session (n), not on the stack: passed to the AEAD interface, a
// stack array would escape and cost an allocation per packet.
type aeadNonce [chacha20poly1305.NonceSize]byte

func (n *aeadNonce) set(pn uint64) []byte {
	binary.BigEndian.PutUint64(n[4:], pn)
	return n[:]
}

// sealPacket encrypts b[start+HeaderLen:] in place, authenticates the
// header with it, and appends the tag.
func sealPacket(b []byte, start int, aead cipher.AEAD, n *aeadNonce, pn uint64) []byte {
	b = slices.Grow(b, tagLen) // Seal then works in place
	header := b[start : start+HeaderLen]
	plain := b[start+HeaderLen:]
	sealed := aead.Seal(plain[:0], n.set(pn), plain, header)
	return b[:start+HeaderLen+len(sealed)]
}

// openPacket decrypts p's frames into dst (reused; the datagram itself is
// not modified) and returns them.
func openPacket(dst, p []byte, aead cipher.AEAD, n *aeadNonce, pn uint64) ([]byte, error) {
	if len(p) < HeaderLen+tagLen {
		return nil, ErrShort
	}
	out, err := aead.Open(dst[:0], n.set(pn), p[HeaderLen:], p[:HeaderLen])
	if err != nil {
		return nil, ErrIntegrity
	}
	return out, nil
}

// sessionKeys derives a session's two keys from the device's pre-shared
// key, the client's nonce and the session id: fresh keys for every
// session, so packet numbers restarting at zero never reuse a nonce.
func sessionKeys(psk []byte, nonce, id uint64) (c2s, s2c cipher.AEAD) {
	derive := func(label string) cipher.AEAD {
		m := hmac.New(sha256.New, psk)
		m.Write([]byte(label))
		var ids [16]byte
		binary.BigEndian.PutUint64(ids[0:], nonce)
		binary.BigEndian.PutUint64(ids[8:], id)
		m.Write(ids[:])
		aead, err := chacha20poly1305.New(m.Sum(nil))
		if err != nil {
			panic(err) // the key is always 32 bytes
		}
		return aead
	}
	return derive("edgemux rudp c2s"), derive("edgemux rudp s2c")
}

// initialAuth is the AUTH frame's MAC over a sealed-mode INITIAL (header
// and frames before the AUTH frame): it proves the client holds the
// device's key before the server creates a session.
func initialAuth(psk, packet []byte) [authLen]byte {
	m := hmac.New(sha256.New, psk)
	m.Write([]byte("edgemux rudp initial"))
	m.Write(packet)
	var sum [sha256.Size]byte
	var out [authLen]byte
	copy(out[:], m.Sum(sum[:0]))
	return out
}

// replayWindow remembers the packet numbers received within the last 128:
// a duplicate (or a replay) of one of them, or anything older, is dropped.
type replayWindow struct {
	largest uint64
	bits    [2]uint64 // bit i: largest-i was received
	any     bool
}

const replaySpan = 128

// expected is the packet number the window expects next, to expand a
// packet's 32-bit number.
func (w *replayWindow) expected() uint64 {
	if !w.any {
		return 0
	}
	return w.largest + 1
}

// seen reports whether pn was already received or is too old to tell.
func (w *replayWindow) seen(pn uint64) bool {
	if !w.any || pn > w.largest {
		return false
	}
	d := w.largest - pn
	if d >= replaySpan {
		return true
	}
	return w.bits[d/64]&(1<<(d%64)) != 0
}

// mark records pn as received; call only after the packet is authentic.
func (w *replayWindow) mark(pn uint64) {
	if !w.any {
		w.any, w.largest, w.bits = true, pn, [2]uint64{1, 0}
		return
	}
	if pn > w.largest {
		shift := pn - w.largest
		switch {
		case shift >= replaySpan:
			w.bits = [2]uint64{0, 0}
		case shift >= 64:
			w.bits[1], w.bits[0] = w.bits[0]<<(shift-64), 0
		default:
			w.bits[1] = w.bits[1]<<shift | w.bits[0]>>(64-shift)
			w.bits[0] <<= shift
		}
		w.bits[0] |= 1
		w.largest = pn
		return
	}
	d := w.largest - pn
	if d < replaySpan {
		w.bits[d/64] |= 1 << (d % 64)
	}
}
