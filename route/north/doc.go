// Package north carries bus messages up to MQTT brokers and brings
// commands back down: each configured sink is a bus subscriber with a
// connection of its own (one goroutine, plus one draining its store).
//
// A sink maps bus filters to remote topic templates, HiveMQ Edge style:
// {topic} is the bus topic, {1}, {2}.. the levels the filter's wildcards
// matched ("#" matches the rest, slashes and all), {gateway} the
// gateway's name. A map with on: change publishes a topic's payload only
// when it differs from the last one sent there; the table behind it is
// bounded (change_table), and a topic evicted from it is sent again on its
// next message (counted).
//
// Payloads go raw, as the bus holds them, or in an envelope:
// {"v": <the payload as JSON if it is JSON, else as a string>, "src": the
// bus source, "q": quality, "ts": unix ms}. A payload that is itself a
// poller's {"v","q","ts"} object is unwrapped: its value, quality and
// time are the envelope's.
//
// Commands: a sink subscribes to its commands' remote filters and
// publishes what arrives into the bus with src "mqtt:<sink>", on the
// topic its template names, only when an allow filter matches that topic;
// anything else is refused, counted and logged with its origin. A command
// to a polled, writable Modbus tag is a write (bus.PublishDone reports
// the device's answer, logged and counted). A message whose src is the
// sink's own is never sent back out through that sink: no echo loops.
//
// The uplink is an interface (Uplink) so each engine sits under the same
// sink logic: MQTT 3.1.1 through eclipse/paho.mqtt.golang (mqtt.go) and
// NATS, core or JetStream, through nats-io/nats.go (nats.go). An uplink
// reconnects on its own, with a fresh client each time; the MQTT one
// learns of a lost connection from paho's report or, should that report
// never come, from paho's status within a second (linkCheck).
//
// With a store (route/spool) every message goes through the queue on disk
// and is acked there only once the broker took it (store.go): at least
// once, in order per sink, an outage's backlog drained at drain_rate.
// While the link is up a message is published as it is stored, and its
// outcome waits in memory (live.go) for the drainer, which confirms it
// in order without reading it back: only a backlog is read from disk.
//
// Publishes in flight are a sliding window (window.go) of inflight slots,
// oldest first: the next goes as soon as there is room, and the store is
// acked in order as the oldest is confirmed, never past one that is not.
// A slot is an MQTT token or a JetStream PubAck; on core NATS it is a
// flush, which settles every publish written before its PING at once, so
// the sink never waits for a flush to send on.
package north
