package north

import (
	"github.com/edgemux/edgemux/route/bus"
)

// command takes one remote message from the uplink (on the engine's
// goroutine): mapped to a bus topic, allowed or refused, published.
func (s *Sink) command(remote string, payload []byte) {
	topic, ok := busTopic(s.cmds, remote, s.gateway)
	if ok && bus.ValidTopic(topic) != nil {
		ok = false
	}
	if !ok || !s.allowed(topic) {
		s.c.cmdRefused.Add(1)
		s.log.Warn("north: command refused: bus topic not allowed", "remote_topic", remote, "bus_topic", topic, "origin", s.up.Origin())
		return
	}
	err := s.bus.PublishDone(nil, topic, payload, s.src, func(err error) {
		if err != nil {
			s.c.cmdFailed.Add(1)
			s.log.Warn("north: command write failed", "remote_topic", remote, "bus_topic", topic, "origin", s.up.Origin(), "err", err)
			return
		}
		s.c.cmdWritten.Add(1)
		s.log.Info("north: command written", "remote_topic", remote, "bus_topic", topic, "origin", s.up.Origin())
	})
	if err != nil {
		s.c.cmdFailed.Add(1)
		s.log.Warn("north: command not taken by the bus", "remote_topic", remote, "bus_topic", topic, "origin", s.up.Origin(), "err", err)
	}
}

// allowed reports whether an allow filter matches topic.
func (s *Sink) allowed(topic string) bool {
	for _, f := range s.cfg.Allow {
		if bus.Match(f, topic) {
			return true
		}
	}
	return false
}
