// Package rudp is edgemux's reliable UDP core: the protocol logic only, in
// the style of quic-go's pure core. Nothing here reads or writes a socket
// or reads a clock: every entry point takes the current time, received
// datagrams go in through Input, datagrams to send come out through
// AppendDatagram (appended into the caller's buffer), and Tick runs the
// timers. The I/O shells are thin: Handler runs endpoints on the
// gateway's datagram workers, Stream a client on a UDP socket of its own,
// and package lossy's in-memory network drives both in tests. Streams
// runs a TCP protocol's handler over the sessions (the private protocol's
// datagram binding).
//
// A session carries two channels: reliable, ordered messages (Send,
// ReadMessage), fragmented to the path's datagram size and reassembled,
// and unreliable datagrams (SendUnreliable, ReadDatagram) for telemetry
// that may be lost. Losses are found by cumulative ACKs with SACK ranges,
// RACK-TLP time-based detection (RFC 8985) and, last, an RTO (RFC 6298,
// Karn's rule, capped backoff). A session dies when nothing has been heard
// from the peer for the idle timeout, never after a count of retries.
//
// The server side (Endpoint) keeps no state for an address until it has
// echoed a cookie bound to that address (a stateless retry), sends at most
// three times what it received toward an address it has not validated,
// and finds sessions by a random 64-bit id, so a NAT that rebinds the
// client's port keeps the session; the new path is validated before it
// is trusted. SPEC.md is the wire format; README.md the design and knobs.
package rudp
