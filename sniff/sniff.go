// Package sniff classifies a flow from its first bytes: pure functions, no
// I/O. The gateway's epoll loop peeks (recv with MSG_PEEK) and calls Detect
// on what it has so far; nothing is consumed, so the handler or a forwarded
// backend later reads the same bytes intact.
//
// Detect walks an ordered table of detectors, like net/http's sniff.go. Each
// detector answers Match, No, or NeedMore with the smallest total prefix
// length at which it could say Match. Every detector is monotone: once it
// says Match or No for a prefix, it says the same for every extension of that
// prefix, so the loop may call Detect again whenever more bytes arrive and
// never sees a decision taken back.
//
// The order is most specific first, so that a loose test never claims what a
// stricter one would have recognised:
//
//  1. Modbus TCP: protocol id 0, a bounded length and a function code of
//     1..127 over 8 bytes; its first two bytes (the transaction id) are
//     arbitrary.
//  2. Private: the two magic bytes E3 4D. Everything after them is the
//     handler's to judge, so that a first frame which is not a valid HELLO
//     gets the protocol's own ERROR (protocols/private/SPEC.md, sections 1
//     and 5) instead of a silent close. Modbus goes first because its
//     transaction id may be anything, E3 4D included; a private frame has
//     version 1 where Modbus needs a zero, so the two part at byte 2.
//  3. CoAP over TCP: one nibble-coded length and a CSM code byte (7.01), so
//     as little as two bytes.
//  4. TLS: record type, version and handshake type over 6 bytes.
//  5. HTTP/1.x: a method token and a space, which is plain ASCII that the
//     binary detectors above all refuse early.
//
// No detector needs more than 8 bytes (maxNeed), so Detect always decides
// within the smallest byte budget the config allows (16); the budget bounds
// the longer waits of the gateway: an HTTP header block, a TLS ClientHello.
//
// A detector only wins when no earlier detector still needs more bytes. The
// one real overlap is Modbus against CoAP: a CSM with no options or token is
// the two bytes 00 E1, which is also a plausible Modbus transaction id. Modbus
// rules itself out as soon as bytes 2..7 contradict it (protocol id, length or
// function code), so a CSM followed by options or by a next message resolves
// at once; a lone two-byte CSM followed by silence stays NeedMore until the
// sniff deadline, when DetectExpired settles it: no Modbus master sends two
// bytes of a request and waits, and a CoAP client that sent a bare CSM may
// well be waiting for the server's before it says more.
//
// HTTP/2 with prior knowledge ("PRI * HTTP/2.0") is not an HTTP/1.x method and
// is not recognised; HTTPUpgrade tells a WebSocket handshake from plain HTTP
// once the header block is complete. TLSServerName reads the SNI of a
// ClientHello for routes that forward by server name. ClassifyDatagram sorts
// the UDP side: CoAP (RFC 7252) or the reliable-UDP core's frames.
package sniff

import "strings"

// Proto is a protocol the sniffer can recognise on a TCP flow.
type Proto uint8

// The protocols. These values are names only; Detect tries them in the
// order of its table (see the package doc).
const (
	Unknown Proto = iota
	Modbus
	HTTP
	CoAP // CoAP over TCP, RFC 8323
	Private
	TLS
	// WebSocket is never returned by Detect: it is HTTP that the gateway
	// refines with HTTPUpgrade once the header block is complete, so that
	// routes can send upgrades and plain HTTP to different places.
	WebSocket
)

var protoNames = [...]string{
	Unknown: "unknown",
	Modbus:  "modbus",
	HTTP:    "http",
	CoAP:    "coap",
	Private: "private",
	TLS:     "tls",
	// WebSocket is last: it is not in Detect's table.
	WebSocket: "websocket",
}

// String returns the protocol's lower-case name as used in the YAML routes;
// a value outside the list is "invalid".
func (p Proto) String() string {
	if int(p) < len(protoNames) {
		return protoNames[p]
	}
	return "invalid"
}

// ParseProto maps a name from the YAML routes (case-insensitive) to its
// Proto; ok is false for a name it does not know.
func ParseProto(s string) (p Proto, ok bool) {
	for i, name := range protoNames {
		if strings.EqualFold(s, name) {
			return Proto(i), true
		}
	}
	return Unknown, false
}

// Verdict is a detector's answer for a prefix.
type Verdict uint8

// The verdicts. Match and No are final: more bytes never change them.
const (
	No       Verdict = iota // these bytes cannot start this protocol
	NeedMore                // undecided; see the accompanying need
	Match                   // the flow speaks this protocol
)

var verdictNames = [...]string{No: "no", NeedMore: "need-more", Match: "match"}

// String returns "no", "need-more" or "match" ("invalid" otherwise).
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "invalid"
}

// Result is Detect's answer for a prefix.
type Result struct {
	Proto   Proto   // the matching protocol when Verdict is Match, else Unknown
	Verdict Verdict // Match, NeedMore or No
	// Need is, when Verdict is NeedMore, the smallest total prefix length
	// (not the number of extra bytes) at which some detector still in the
	// running could say Match; it is always greater than the prefix given.
	// A detector may say No before that, so call Detect again on every new
	// byte, and compare Need with the byte budget to give up early.
	Need int
}

// maxNeed is the most bytes any detector needs to decide (Modbus and the
// longest HTTP methods).
const maxNeed = 8

// detector is one row of Detect's table.
type detector struct {
	proto  Proto
	detect func(p []byte) (Verdict, int)
}

// detectors is Detect's table, most specific first (see the package doc).
var detectors = [...]detector{
	{Modbus, DetectModbus},
	{Private, DetectPrivate},
	{CoAP, DetectCoAPTCP},
	{TLS, DetectTLS},
	{HTTP, DetectHTTP},
}

// DetectExpired is Detect for a prefix that will not grow: the sniff
// deadline passed. A detector that still needs more bytes is out, so the
// first that says Match wins; otherwise the result is Detect's. Only the
// bare CoAP CSM (00 E1) that Modbus could still have claimed is decided by
// it today.
func DetectExpired(prefix []byte) Result {
	for i := range detectors {
		if verdict, _ := detectors[i].detect(prefix); verdict == Match {
			return Result{Proto: detectors[i].proto, Verdict: Match}
		}
	}
	return Detect(prefix)
}

// Detect classifies the first bytes of a TCP flow. It walks the detectors in
// order: the first that says Match wins unless an earlier one said NeedMore;
// if some detector said NeedMore and none before it matched, the result is
// NeedMore with the smallest need of all that said so; if every detector
// says No the result is {Unknown, No, 0}. It does not allocate.
func Detect(prefix []byte) Result {
	need := 0
	for i := range detectors {
		verdict, n := detectors[i].detect(prefix)
		switch verdict {
		case Match:
			if need == 0 {
				return Result{Proto: detectors[i].proto, Verdict: Match}
			}
		case NeedMore:
			if need == 0 || n < need {
				need = n
			}
		}
	}
	if need > 0 {
		return Result{Verdict: NeedMore, Need: need}
	}
	return Result{Verdict: No}
}
