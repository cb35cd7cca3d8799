package rudp

import (
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/rudp/lossy"
)

// TestThinnedAcksStillCome: with a server's max_ack_delay of 25 ms (the
// thinned-ACK setting), sparse telemetry (a message every 20 ms) is
// acknowledged one ACK packet per two packets, and the last, odd
// packet's ACK still comes, after the delay, without the sender probing
// for it. The client keeps the default 2 ms max_ack_delay of its own:
// its probe timer must learn the server's longer delay from the ACKs
// (over a 4 ms RTT, two SRTTs are far below the server's 25 ms).
// (Before thinned ACKs the server sent an ACK packet per packet.)
// thinAckDelay is the max_ack_delay that thins a telemetry stream's ACKs
// to one per two packets.
const thinAckDelay = 25 * time.Millisecond

func TestThinnedAcksStillCome(t *testing.T) {
	const total = 41
	short := lossy.Impairment{Delay: 2 * time.Millisecond} // an RTT well below the ACK delay
	st := newStreamOver(t, 43, lossy.Config{Up: short, Down: short}, Config{MaxAckDelay: thinAckDelay}, Config{MaxAckDelay: 2 * time.Millisecond}, total, 20*time.Millisecond)
	up, down := 0, 0
	st.tap = func(isUp bool, b []byte) {
		if isUp {
			up++
		} else {
			down++
		}
	}
	st.finish(total)
	st.runUntil(st.now.Add(time.Second), func() bool { return st.c.Buffered() == 0 })
	if b := st.c.Buffered(); b != 0 {
		t.Fatalf("%d bytes never acknowledged", b)
	}
	if down > (up+1)/2+1 {
		t.Fatalf("%d ACK packets for %d packets (%d messages): not thinned", down, up, total)
	}
	if s := st.c.Stats(); s.Retransmits != 0 || s.ProbesSent != 0 {
		t.Fatalf("the sender did not wait for the delayed ACK: %d retransmits, %d probes", s.Retransmits, s.ProbesSent)
	}
}
