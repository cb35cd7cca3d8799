package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/protocols/rudp"
)

// client is one connection of one protocol: do sends request seq and
// waits for its answer; an error answer is an error.
type client interface {
	do(seq uint32) error
	close()
}

var errAnswer = errors.New("mixload: unexpected answer")

// dialClient opens connection i of proto.
func dialClient(ctx context.Context, o options, i int) (client, error) {
	switch o.Proto {
	case "modbus":
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", o.Addr)
		if err != nil {
			return nil, err
		}
		// A master that says nothing is a silent peer to the gateway,
		// probed or quarantined at the sniff deadline: ask at once, as
		// a poller does, so the connection is classified before the
		// window opens.
		m := &modbusClient{c: c, timeout: o.Timeout}
		if err := m.do(0); err != nil {
			c.Close()
			return nil, err
		}
		return m, nil
	case "ws-ping", "ws-pub":
		d := websocket.Dialer{Subprotocols: []string{"edgemux.v1"}, HandshakeTimeout: o.Timeout}
		c, _, err := d.DialContext(ctx, "ws://"+o.Addr+"/ws", nil)
		if err != nil {
			return nil, err
		}
		return &wsClient{c: c, pub: o.Proto == "ws-pub", topic: fmt.Sprintf("mix/w%d", i), timeout: o.Timeout}, nil
	case "private":
		c, err := private.Dial(ctx, o.Addr, fmt.Sprintf("mix-p%d", i), private.ClientOptions{Timeout: o.Timeout})
		if err != nil {
			return nil, err
		}
		return &privClient{c: c, topic: fmt.Sprintf("mix/p%d", i)}, nil
	case "rudp":
		c, err := private.DialUDP(ctx, o.Addr, fmt.Sprintf("mix-r%d", i), rudp.Config{}.WithDefaults(), private.ClientOptions{Timeout: o.Timeout})
		if err != nil {
			return nil, err
		}
		return &privClient{c: c, topic: fmt.Sprintf("mix/r%d", i)}, nil
	case "coap":
		c, err := (&net.Dialer{}).DialContext(ctx, "udp", o.Addr)
		if err != nil {
			return nil, err
		}
		return &coapClient{c: c, path: "c" + strconv.Itoa(i), timeout: o.Timeout}, nil
	}
	return nil, fmt.Errorf("mixload: no protocol %q", o.Proto)
}

// modbusClient reads one holding register (function 3) of unit 1.
type modbusClient struct {
	c       net.Conn
	addr    uint16 // the register read
	timeout time.Duration
	buf     [260]byte
}

func (m *modbusClient) do(seq uint32) error {
	req := [12]byte{0, 0, 0, 0, 0, 6, 1, 3, 0, 0, 0, 1}
	binary.BigEndian.PutUint16(req[0:], uint16(seq))
	binary.BigEndian.PutUint16(req[8:], m.addr)
	m.c.SetDeadline(time.Now().Add(m.timeout))
	if _, err := m.c.Write(req[:]); err != nil {
		return err
	}
	h := m.buf[:8]
	if _, err := io.ReadFull(m.c, h); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint16(h[4:])) - 2 // after unit id and function
	if n < 0 || n > 253 {
		return errAnswer
	}
	if _, err := io.ReadFull(m.c, m.buf[8:8+n]); err != nil {
		return err
	}
	if binary.BigEndian.Uint16(h) != uint16(seq) || h[7] != 3 {
		return fmt.Errorf("%w: function 0x%02x", errAnswer, h[7])
	}
	return nil
}

func (m *modbusClient) close() { m.c.Close() }

// wsClient sends {"op":"ping"} (a heartbeat), or a pub and then a ping
// (pub is not acknowledged; the pong after it says it was handled), and
// waits for the pong.
type wsClient struct {
	c       *websocket.Conn
	pub     bool
	topic   string
	timeout time.Duration
}

var wsPing = []byte(`{"op":"ping"}`)

func (w *wsClient) do(seq uint32) error {
	w.c.SetWriteDeadline(time.Now().Add(w.timeout))
	w.c.SetReadDeadline(time.Now().Add(w.timeout))
	if w.pub {
		msg := `{"op":"pub","topic":"` + w.topic + `","data":` + strconv.FormatUint(uint64(seq), 10) + `}`
		if err := w.c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			return err
		}
	}
	if err := w.c.WriteMessage(websocket.TextMessage, wsPing); err != nil {
		return err
	}
	for {
		_, b, err := w.c.ReadMessage()
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(`"pong"`)) {
			return nil
		}
		if bytes.Contains(b, []byte(`"error"`)) {
			return fmt.Errorf("%w: %s", errAnswer, b)
		}
	}
}

func (w *wsClient) close() { w.c.Close() }

// privClient publishes with a message id and waits for the ACK, over TCP
// or the reliable UDP core.
type privClient struct {
	c     *private.Client
	topic string
	data  [8]byte
}

func (p *privClient) do(seq uint32) error {
	binary.BigEndian.PutUint32(p.data[:], seq)
	return p.c.Publish(p.topic, p.data[:], true)
}

func (p *privClient) close() { p.c.Close() }

// coapClient sends a confirmable PUT /t/mix/<path> and waits for the
// piggybacked 2.04 Changed.
type coapClient struct {
	c       net.Conn
	path    string
	timeout time.Duration
	buf     [512]byte
}

func (c *coapClient) do(seq uint32) error {
	mid := uint16(seq)
	req := []byte{0x40, 0x03, byte(mid >> 8), byte(mid), 0xB1, 't', 0x03, 'm', 'i', 'x', byte(len(c.path))}
	req = append(req, c.path...)
	req = append(req, 0xFF)
	req = strconv.AppendUint(req, uint64(seq), 10)
	c.c.SetDeadline(time.Now().Add(c.timeout))
	if _, err := c.c.Write(req); err != nil {
		return err
	}
	for {
		n, err := c.c.Read(c.buf[:])
		if err != nil {
			return err
		}
		b := c.buf[:n]
		if n < 4 || b[0]>>6 != 1 || binary.BigEndian.Uint16(b[2:]) != mid {
			continue // not the answer to this request (a late one)
		}
		if b[1] != 0x44 { // 2.04 Changed
			return fmt.Errorf("%w: code %d.%02d", errAnswer, b[1]>>5, b[1]&31)
		}
		return nil
	}
}

func (c *coapClient) close() { c.c.Close() }
