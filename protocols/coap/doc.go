// Package coap serves CoAP on edgemux's shared port: over UDP (RFC 7252)
// as a protocols.DatagramHandler on a pool's datagram workers, and over
// TCP (RFC 8323) as a protocols.Handler. Its resources are the topics of
// the bus: GET /t/{topic...} reads a topic's last value, PUT and POST
// publish, DELETE clears a retained value where coap.delete allows it,
// Observe (RFC 7641) subscribes to a topic or an MQTT-style filter, and
// /.well-known/core lists them (RFC 6690). Bodies larger than a block
// travel block-wise (RFC 7959), both ways, Observe included.
//
// The message codec is go-coap's (github.com/plgd-dev/go-coap/v3: its
// message, codes, udp/coder and tcp/coder packages); the rest is ours,
// because go-coap's connections want goroutines, locks and timers of
// their own per peer, and the gateway's workers own their peers instead
// (README.md says why at more length). The UDP side is a pure state
// machine, Endpoint, fed datagrams and a clock by a thin shell (udp.go):
// peers, the response cache for duplicates, confirmable notifications
// and their retransmission, all owned by one worker goroutine.
package coap
