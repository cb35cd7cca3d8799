// Package cluster makes one topic bus of several gateways' buses through
// NATS JetStream: a value published on one gateway, on a topic the
// cluster spans, reaches the subscribers of every other gateway, in order
// per topic, and a gateway started later finds the last value of every
// topic in its cache before it reports ready.
//
// # One subject per topic, the KV bucket's own
//
// The last values live in a JetStream KV bucket (created with history 1
// if missing). A topic's value is published on the bucket's subject for
// it, "$KV.<bucket>.v.<tokens>" (names.go says how a topic becomes
// tokens): JetStream keeps it as the key's value, and the same publish
// reaches, as plain NATS, every gateway's subscription on
// "$KV.<bucket>.>". So each message crosses the network once, is stored
// once, and the subscription sees every message (a KV watch, a JetStream
// consumer, would skip a value superseded before it was delivered, which
// history 1 makes likely under load). A gateway that starts reads the
// bucket's last value per key with an ordered consumer, after it has
// subscribed and before it handles a live message, so no value falls
// between the two.
//
// Each message carries headers: Edgemux-Origin (the gateway id of its
// publisher), Edgemux-Src (the bus source there: "ws", "modbus-poll",
// ...) and Edgemux-Ts (its unix nanoseconds there). Received, it is
// published into the local bus with src "cluster:<origin>"; its local
// timestamp is the time it arrived.
//
// # Loops are impossible by construction
//
// The mirror (mirror.go) sends a local message to NATS only if its src is
// not "cluster:...", and every message received from NATS is published
// locally with a "cluster:" src. So a message is sent by the gateway it
// was published on and by no other: it crosses NATS once, whatever the
// topology of filters and gateways. The connection asks for no echo of
// its own publishes; a message that still arrives with this gateway's own
// origin (a second gateway with the same id) is dropped and counted
// (loop_rejected).
//
// # Order, back-pressure, link loss
//
// The mirror is an ordinary bus subscriber with a bounded queue and the
// bus's drop policy, drained by one goroutine that publishes in queue
// order on one connection: order per topic holds end to end, and a slow
// or dead link costs queue drops (counted), never a blocked publisher.
// While the link is down nothing is sent: the topics published meanwhile
// are remembered (bounded; the rest counted) and, once it is back, the
// latest local value of each is sent, so the other gateways converge on
// the last values without a replay of everything missed. A publish whose
// acknowledgement failed is re-sent the same way; a remote subscriber may
// then see that last value twice, never an older one after a newer one.
//
// # Claimed topics
//
// A tag a gateway polls (bus.Claim) belongs to that gateway's device: a
// publish to it elsewhere must not become a value the device does not
// have. Each gateway announces its claimed topics under the bucket key
// "c.<gateway id>"; the others claim those topics on their own bus for
// the owner's "cluster:<id>" source, so the owner's values are taken as
// values and anyone else's publish is a write, forwarded to the owner
// (write.go), which writes the device and answers with its outcome.
//
// # Gateway ids
//
// Every gateway answers on "<subject_prefix>.gateway.<id>"; at start a
// gateway asks there first and refuses to start if another live gateway
// answers for its id.
package cluster
