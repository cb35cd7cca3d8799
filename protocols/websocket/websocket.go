// Package websocket serves WebSocket connections on the gateway's shared
// port and speaks a small JSON publish/subscribe protocol over the topic
// bus.
//
// gorilla/websocket does the handshake and the message codec, but its
// reads block and its first read error sticks, and a worker may never
// block. So the worker owns the bytes: the session collects the HTTP
// request, parses it (request.go: stricter than net/http, and without its
// garbage), upgrades through gorilla's Upgrader with a Hijacker shim whose
// net.Conn reads from and writes to memory, scans frame headers itself
// (Scanner), answers ping and close itself, and asks gorilla to read a
// data message only once all of its frames are buffered, so gorilla never
// waits and never sees an error. gorilla's writes land in a per-call
// staging buffer that the session hands to protocols.Conn.Write whole,
// where the gateway's output buffer and its high-water mark take over.
//
// No goroutine runs per connection, and an idle upgraded connection holds
// only its session: gorilla's Conn and the staging buffer are lent to it
// for one call at a time (lease.go). This departs from DESIGN.md, which
// keeps a gorilla Conn per connection; see README.md for why and the
// measured figures.
package websocket

import (
	"errors"
	"fmt"

	"github.com/edgemux/edgemux/protocols"
)

// Errors: the reasons a session gives its worker for closing. Those that
// mean a misbehaving peer wrap protocols.ErrMalformed as well, so the
// gateway records them with the quarantine book.
var (
	// ErrProtocol: a frame breaks RFC 6455 (close 1002).
	ErrProtocol = errors.New("websocket: protocol error")
	// ErrTooBig: a message is over websocket.max_message (close 1009).
	ErrTooBig = errors.New("websocket: message too big")
	// ErrInvalidPayload: a text message or close reason is not UTF-8, or a
	// compressed message does not inflate (close 1007).
	ErrInvalidPayload = errors.New("websocket: invalid payload data")
	// ErrHeaderTooLarge: the HTTP request is over websocket.max_header_bytes (431).
	ErrHeaderTooLarge = errors.New("websocket: request header too large")
	// ErrBadRequest: the HTTP request is not a WebSocket handshake (400).
	ErrBadRequest = errors.New("websocket: bad handshake request")
	// ErrNotFound: the request path is not websocket.path (404).
	ErrNotFound = errors.New("websocket: no WebSocket endpoint at this path")
	// ErrForbidden: the Origin is not allowed (403).
	ErrForbidden = errors.New("websocket: origin not allowed")
	// ErrHandshakeTimeout: the request was not complete within
	// websocket.handshake_timeout (408).
	ErrHandshakeTimeout = errors.New("websocket: handshake timeout")
	// ErrPongTimeout: the peer left websocket.missed_pongs pings unanswered.
	ErrPongTimeout = errors.New("websocket: peer stopped answering pings")
	// ErrSlowConsumer: the peer does not read its deliveries (close 1008).
	ErrSlowConsumer = errors.New("websocket: slow consumer")
	// ErrPeerClose: the peer closed the connection with a close frame.
	ErrPeerClose = errors.New("websocket: closed by peer")
	// ErrInternal: gorilla refused what the scanner let through; a bug.
	ErrInternal = errors.New("websocket: internal error")
	// ErrPanic: the session recovered a panic of its own.
	ErrPanic = fmt.Errorf("websocket: %w", protocols.ErrPanic)
	// ErrOperatorChanged: the operator rules that admitted the session
	// were replaced (close 1008); the client reconnects under the new ones.
	ErrOperatorChanged = errors.New("websocket: operator access changed")
)

// Close codes this package sends (RFC 6455 §7.4.1).
const (
	CloseNormal         = 1000
	CloseGoingAway      = 1001
	CloseProtocolError  = 1002
	CloseInvalidPayload = 1007
	ClosePolicy         = 1008
	CloseTooBig         = 1009
	CloseInternal       = 1011
)

// Source is the name the handler publishes under (bus.Message.Src): the
// protocol's name, as the private protocol's SPEC.md lists it.
const Source = "websocket"
