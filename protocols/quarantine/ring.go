package quarantine

import (
	"encoding/hex"
	"net/netip"
	"time"

	"github.com/edgemux/edgemux/protocols"
)

// Sample is one recorded landing as the dashboard shows it.
type Sample struct {
	Peer   string           // remote address, host:port
	Reason protocols.Reason // why it landed here
	Hex    string           // hex of at most SampleBytes of the bytes offered
	At     time.Time        // when it was recorded
	Bytes  int              // how many bytes were offered to Record (Hex may cover fewer)
}

// sampleRing keeps the last few landings. Sample bytes are copied into one
// backing array allocated up front, so recording allocates nothing; the
// strings of a Sample are built only when the dashboard asks.
type sampleRing struct {
	entries []ringEntry
	data    []byte // len(entries) * width
	width   int    // bytes kept per entry
	next    int    // entry written next
	filled  int    // entries holding a landing
}

type ringEntry struct {
	peer   netip.AddrPort
	reason protocols.Reason
	at     time.Time
	size   int // bytes offered
	kept   int // bytes copied into data
}

func newSampleRing(entries, width int) *sampleRing {
	return &sampleRing{
		entries: make([]ringEntry, entries),
		data:    make([]byte, entries*width),
		width:   width,
	}
}

func (r *sampleRing) put(peer netip.AddrPort, reason protocols.Reason, at time.Time, sample []byte) {
	i := r.next
	kept := copy(r.data[i*r.width:(i+1)*r.width], sample)
	r.entries[i] = ringEntry{peer: peer, reason: reason, at: at, size: len(sample), kept: kept}
	r.next = (i + 1) % len(r.entries)
	r.filled = min(r.filled+1, len(r.entries))
}

// appendNewest appends the held samples to dst, newest first.
func (r *sampleRing) appendNewest(dst []Sample) []Sample {
	n := len(r.entries)
	for k := range r.filled {
		i := (r.next - 1 - k + n) % n
		e := &r.entries[i]
		raw := r.data[i*r.width : i*r.width+e.kept]
		dst = append(dst, Sample{
			Peer:   peerString(e.peer),
			Reason: e.reason,
			Hex:    hex.EncodeToString(raw),
			At:     e.at,
			Bytes:  e.size,
		})
	}
	return dst
}

// peerString renders an address for people: "" rather than "invalid
// AddrPort" when the recorder had no peer.
func peerString(p netip.AddrPort) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}
