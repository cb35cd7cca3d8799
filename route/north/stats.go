package north

import "time"

// Stats are one sink's counters and state.
type Stats struct {
	Name       string `json:"name"`
	LinkUp     bool   `json:"link_up"`
	Published  uint64 `json:"published"`  // messages the broker took (QoS 1: acknowledged)
	Failed     uint64 `json:"failed"`     // publishes that failed (link down, no ack in time); with a store they are sent again
	Spooled    uint64 `json:"spooled"`    // messages appended to the store
	Drained    uint64 `json:"drained"`    // of those published, the ones that waited out an outage in the store
	Dropped    uint64 `json:"dropped"`    // messages lost: the store's cap (policy oldest), no store and the link down, the bus queue overflowing
	Refused    uint64 `json:"refused"`    // messages the store refused at its cap (policy refuse)
	Suppressed uint64 `json:"suppressed"` // on: change maps' repeats not sent
	Evicted    uint64 `json:"evicted"`    // topics evicted from the on: change table

	Commands        int    `json:"commands"` // command mappings configured (north.sinks[].commands)
	CommandsWritten uint64 `json:"commands_written"`
	CommandsRefused uint64 `json:"commands_refused"`
	CommandsFailed  uint64 `json:"commands_failed"`
	// CommandsUp: the sink's commands are subscribed at its broker. A
	// sink reports its link up before it subscribes, and a command the
	// broker gets before the subscription reaches nobody; a subscription
	// that fails (an error, no SUBACK in time) leaves this false while
	// the link is up. Always false for a sink without commands.
	CommandsUp bool `json:"commands_up"`

	Store        bool    `json:"store"`
	QueueRecords int64   `json:"queue_records"`
	QueueBytes   int64   `json:"queue_bytes"`
	OldestAge    float64 `json:"oldest_age_s"` // seconds; 0 when the queue is empty
}

// Stats reads the sink's counters.
func (s *Sink) Stats() Stats {
	st := Stats{
		Name: s.name, LinkUp: s.up.Up(),
		Published: s.c.published.Load(), Failed: s.c.failed.Load(), Spooled: s.c.spooled.Load(),
		Drained: s.c.drained.Load(), Dropped: s.c.dropped.Load(), Refused: s.c.refused.Load(),
		Suppressed: s.c.suppressed.Load(), Evicted: s.change.evicted.Load(),
		Commands: len(s.cmds), CommandsWritten: s.c.cmdWritten.Load(), CommandsRefused: s.c.cmdRefused.Load(), CommandsFailed: s.c.cmdFailed.Load(),
	}
	// A late onUp (NATS runs it on a goroutine of its own) must not show
	// commands up on a link that is down again.
	st.CommandsUp = st.LinkUp && s.cmdsUp.Load()
	if s.store != nil {
		q := s.store.Stats()
		st.Store, st.QueueRecords, st.QueueBytes = true, q.Records, q.Bytes
		st.Dropped += q.Dropped
		if !q.Oldest.IsZero() {
			st.OldestAge = max(time.Since(q.Oldest).Seconds(), 0)
		}
	}
	return st
}
