// Package spool is a bounded on-disk FIFO of records: the disk half of a
// sink's store-and-forward. An appender adds records while the uplink is
// down, a drainer Peeks the oldest, sends them, and Acks them.
//
// It is ours, not a library's: github.com/tidwall/wal has no byte cap,
// no drop-oldest or refuse, no CRC on a record (a flipped bit is read
// back) and fails Open on a corrupt tail instead of cutting it; and
// github.com/nsqio/go-diskqueue has no cap on the total size, no CRC,
// skips a whole file on a bad read, and hands a record out as read
// (at-most-once) instead of keeping it until acked.
package spool
