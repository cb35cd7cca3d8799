package north

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync"
)

// ackValve sits in a gate's broker -> client direction and lets the
// broker's acknowledgements through only as the test allows: MQTT
// PUBACKs, or NATS PONGs (the answer to a flush). Everything else passes.
// With it a test holds publishes unconfirmed on a real broker and lets
// them be confirmed one at a time, in the broker's order.
type ackValve struct {
	next  func(r *bufio.Reader) (packet []byte, isAck bool, err error)
	mu    sync.Mutex
	cond  *sync.Cond
	allow int // acks that may pass; < 0: all
	out   int // acks passed
}

func newAckValve(next func(*bufio.Reader) ([]byte, bool, error)) *ackValve {
	v := &ackValve{next: next, allow: -1}
	v.cond = sync.NewCond(&v.mu)
	return v
}

// hold stops acknowledgements (those on their way wait) and starts
// counting them (passed) from zero.
func (v *ackValve) hold() {
	v.mu.Lock()
	v.allow, v.out = 0, 0
	v.mu.Unlock()
}

// pass lets n more through; n < 0 opens the valve.
func (v *ackValve) pass(n int) {
	v.mu.Lock()
	if n < 0 || v.allow < 0 {
		v.allow = -1
	} else {
		v.allow += n
	}
	v.cond.Broadcast()
	v.mu.Unlock()
}

// passed is how many acknowledgements went through since hold.
func (v *ackValve) passed() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.out
}

// relay copies src (the broker) to dst (the client) packet by packet,
// each acknowledgement waiting for the valve.
func (v *ackValve) relay(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	r := bufio.NewReader(src)
	for {
		pkt, isAck, err := v.next(r)
		if err != nil {
			return
		}
		if isAck {
			v.mu.Lock()
			for v.allow == 0 {
				v.cond.Wait()
			}
			if v.allow > 0 {
				v.allow--
			}
			v.out++
			v.mu.Unlock()
		}
		if _, err := dst.Write(pkt); err != nil {
			return
		}
	}
}

// mqttPacket reads one MQTT packet: a PUBACK is an acknowledgement.
func mqttPacket(r *bufio.Reader) ([]byte, bool, error) {
	head, err := r.ReadByte()
	if err != nil {
		return nil, false, err
	}
	pkt := []byte{head}
	length, shift := 0, 0
	for {
		b, err := r.ReadByte()
		if err != nil {
			return nil, false, err
		}
		pkt = append(pkt, b)
		length |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			break
		}
		shift += 7
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, false, err
	}
	return append(pkt, body...), head>>4 == 4, nil
}

// natsLine reads one line of the NATS protocol from the server: a PONG
// is an acknowledgement (the sink's connection subscribes to nothing in
// these tests: no MSG comes).
func natsLine(r *bufio.Reader) ([]byte, bool, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, false, err
	}
	return line, bytes.HasPrefix(line, []byte("PONG")), nil
}

// jsReply reads one line from the server, or a MSG and its payload: a
// MSG that is a JetStream PubAck ({"stream":..,"seq":..}, on the sink's
// reply inbox) is an acknowledgement; the API's replies (they carry a
// "type": the stream's info at connect) pass.
func jsReply(r *bufio.Reader) ([]byte, bool, error) {
	line, err := r.ReadBytes('\n')
	if err != nil || !bytes.HasPrefix(line, []byte("MSG ")) {
		return line, false, err
	}
	payload, err := r.ReadBytes('\n')
	if err != nil {
		return nil, false, err
	}
	isAck := bytes.Contains(payload, []byte(`"seq"`)) && !bytes.Contains(payload, []byte(`"type"`))
	return append(line, payload...), isAck, nil
}
