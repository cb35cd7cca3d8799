package rudp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/netip"
	"time"
)

// cookieJar makes and checks RETRY cookies: a timestamp and a MAC over
// it, the client's nonce, address and port, keyed by a key that depends
// on the rotation period the timestamp falls in. The keys derive from a
// secret shared by the workers, so no state is kept per client and keys
// rotate by themselves; a cookie is good for CookieLifetime and only from
// the address it was sent to.
type cookieJar struct {
	secret   [32]byte
	rotation int64 // seconds
	lifetime int64 // seconds
	// The MACs of the two periods in use, made once per period.
	period [2]int64
	mac    [2]hash.Hash
	in     [8 + 8 + 16 + 2]byte
	sum    [sha256.Size]byte
}

func newCookieJar(secret [32]byte, rotation, lifetime time.Duration) *cookieJar {
	return &cookieJar{
		secret:   secret,
		rotation: max(int64(rotation/time.Second), 1),
		lifetime: max(int64(lifetime/time.Second), 1),
		period:   [2]int64{-1, -1},
	}
}

// keyFor returns the MAC of the period that unix second ts falls in.
func (j *cookieJar) keyFor(ts int64) hash.Hash {
	p := ts / j.rotation
	slot := p & 1
	if j.period[slot] != p {
		k := hmac.New(sha256.New, j.secret[:])
		var label [8 + 8]byte
		copy(label[:8], "cookie k")
		binary.BigEndian.PutUint64(label[8:], uint64(p))
		k.Write(label[:])
		j.mac[slot] = hmac.New(sha256.New, k.Sum(nil))
		j.period[slot] = p
	}
	return j.mac[slot]
}

// compute is the MAC of (ts, nonce, addr) into j.sum.
func (j *cookieJar) compute(ts int64, nonce uint64, addr netip.AddrPort) []byte {
	m := j.keyFor(ts)
	m.Reset()
	binary.BigEndian.PutUint64(j.in[0:], uint64(ts))
	binary.BigEndian.PutUint64(j.in[8:], nonce)
	a := addr.Addr().As16()
	copy(j.in[16:32], a[:])
	binary.BigEndian.PutUint16(j.in[32:], addr.Port())
	m.Write(j.in[:])
	return m.Sum(j.sum[:0])[:cookieLen-4]
}

// appendCookie appends a cookie for nonce and addr made at unix second now.
func (j *cookieJar) appendCookie(b []byte, now int64, nonce uint64, addr netip.AddrPort) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(now))
	return append(b, j.compute(now, nonce, addr)...)
}

// check reports whether cookie was made for nonce and addr no longer than
// the lifetime before unix second now.
func (j *cookieJar) check(cookie []byte, now int64, nonce uint64, addr netip.AddrPort) bool {
	if len(cookie) != cookieLen {
		return false
	}
	ts := int64(binary.BigEndian.Uint32(cookie[:4]))
	if ts > now+1 || now-ts > j.lifetime {
		return false
	}
	return hmac.Equal(cookie[4:], j.compute(ts, nonce, addr))
}
