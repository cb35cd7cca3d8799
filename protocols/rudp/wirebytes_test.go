package rudp

import (
	"testing"
	"time"
)

// wireShare is what one kind of datagram costs in the telemetry load.
type wireShare struct {
	packets, bytes int
}

// TestTelemetryWireBytes says where the bytes of the telemetry load at 5 %
// loss go (the wire-bytes row: 64 B messages, one per 20 ms per
// session): each datagram sent, before the network's loss, by what it
// carries (the handshakes left out, as in the run's figure). It checks the accounting adds up to the run's own figure; the
// shares print with -v.
func TestTelemetryWireBytes(t *testing.T) {
	dur := 20 * time.Second
	if raceEnabled || testing.Short() {
		dur = 3 * time.Second
	}
	kinds := map[string]*wireShare{}
	var total, payload, dataHeaders, acks, headers int
	tap := func(up bool, b []byte) {
		h, err := ParseHeader(b)
		if err != nil || h.Type != TypeData {
			return // the handshake, before the run counts
		}
		total += len(b)
		headers += HeaderLen + crcLen
		var f frame
		hasData, hasAck := false, false
		for rest := b[HeaderLen : len(b)-crcLen]; len(rest) > 0; {
			before := len(rest)
			if rest, err = parseFrame(rest, &f); err != nil {
				t.Fatalf("a datagram the core sent does not parse: %v", err)
			}
			switch f.typ {
			case frameData:
				hasData = true
				payload += len(f.data.data)
				dataHeaders += dataOverhead
			case frameAck:
				hasAck = true
				acks += before - len(rest)
			}
		}
		dir := map[bool]string{true: "client->server ", false: "server->client "}[up]
		switch {
		case hasData:
			kinds[dir+"DATA (an ACK may ride along)"] = add(kinds[dir+"DATA (an ACK may ride along)"], len(b))
		case hasAck:
			kinds[dir+"ACK only"] = add(kinds[dir+"ACK only"], len(b))
		default:
			kinds[dir+"other (PING, PADDING, path)"] = add(kinds[dir+"other (PING, PADDING, path)"], len(b))
		}
	}
	r := runTelemetryTap(t, 0.05, 50, dur, tap)
	delivered := float64(r.delivered * 64)
	if got := float64(total) / delivered; got < r.wirePerPayload-0.01 || got > r.wirePerPayload+0.01 {
		t.Fatalf("the tap counts %.3fx, the run %.3fx", got, r.wirePerPayload)
	}
	t.Logf("%v", r)
	for name, k := range kinds {
		t.Logf("%-45s %7d packets %9d B  %.3fx of the payload", name, k.packets, k.bytes, float64(k.bytes)/delivered)
	}
	t.Logf("by part: payload sent %.3fx (retransmissions %.3fx), header+CRC %.3fx, DATA frame headers %.3fx, ACK frames %.3fx",
		float64(payload)/delivered, float64(payload)/delivered-1, float64(headers)/delivered, float64(dataHeaders)/delivered, float64(acks)/delivered)
}

func add(k *wireShare, n int) *wireShare {
	if k == nil {
		k = &wireShare{}
	}
	k.packets++
	k.bytes += n
	return k
}
