package coap

import (
	"sync/atomic"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
)

// Config is the coap section of the configuration (config.CoAP).
type Config = config.CoAP

// withDefaults fills zero fields with the configuration's defaults, so a
// Handler made from a partial Config (a test's) is sane.
func withDefaults(c Config) Config {
	d := config.Defaults().CoAP
	orInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	orInt(&c.MaxPeers, d.MaxPeers)
	orInt(&c.MaxObservations, d.MaxObservations)
	orInt(&c.BlockSize, d.BlockSize)
	orInt(&c.MaxBody, d.MaxBody)
	orInt(&c.Uploads, d.Uploads)
	orInt(&c.ResponseCache, d.ResponseCache)
	orInt(&c.ConfirmEvery, d.ConfirmEvery)
	orInt(&c.Queue, d.Queue)
	orInt(&c.TCPMaxMessage, d.TCPMaxMessage)
	if c.MaxRetransmit < 0 {
		c.MaxRetransmit = d.MaxRetransmit
	}
	if c.PeerIdle <= 0 {
		c.PeerIdle = d.PeerIdle
	}
	if c.ExchangeLifetime <= 0 {
		c.ExchangeLifetime = d.ExchangeLifetime
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = d.AckTimeout
	}
	if c.ConfirmInterval <= 0 {
		c.ConfirmInterval = d.ConfirmInterval
	}
	c.BlockSize = 16 << szxOf(min(c.BlockSize, 1024)) // a power of two
	return c
}

// Stats are a Handler's counters since New.
type Stats struct {
	Requests      uint64 // requests served (duplicates aside)
	Published     uint64 // values published to the bus
	Duplicates    uint64 // duplicate requests answered from the response cache
	Observations  uint64 // observations registered
	Notifications uint64 // notifications sent
	Confirmable   uint64 // of them confirmable
	Retransmits   uint64 // retransmissions of confirmable notifications
	DeadObservers uint64 // peers whose confirmable notification was never acknowledged: their observations dropped
	Resets        uint64 // Reset messages received
	Malformed     uint64 // messages that could not be parsed (answered with Reset or 4.00, or dropped)
	PeersEvicted  uint64 // UDP peers forgotten: idle, or to make room
	PeersRefused  uint64 // requests from new UDP peers refused: every place held by an observer (5.03)
	Dropped       uint64 // notifications the bus dropped (an observer's queue overflowed)
	Sessions      uint64 // TCP connections opened
	SendErrors    uint64 // UDP datagrams the gateway refused to send (longer than udp.max_datagram)
}

// Counters lists the Stats fields under snake_case names, in a fixed order.
func (st Stats) Counters() []protocols.Counter {
	return []protocols.Counter{
		{Name: "requests", N: st.Requests}, {Name: "published", N: st.Published},
		{Name: "duplicates", N: st.Duplicates}, {Name: "observations", N: st.Observations},
		{Name: "notifications", N: st.Notifications}, {Name: "confirmable", N: st.Confirmable},
		{Name: "retransmits", N: st.Retransmits}, {Name: "dead_observers", N: st.DeadObservers},
		{Name: "resets", N: st.Resets}, {Name: "malformed", N: st.Malformed},
		{Name: "peers_evicted", N: st.PeersEvicted}, {Name: "peers_refused", N: st.PeersRefused},
		{Name: "dropped", N: st.Dropped}, {Name: "sessions", N: st.Sessions},
		{Name: "send_errors", N: st.SendErrors},
	}
}

// counters are the live Stats.
type counters struct {
	requests, published, duplicates, observations, notifications atomic.Uint64
	confirmable, retransmits, deadObservers, resets, malformed   atomic.Uint64
	peersEvicted, peersRefused, dropped, sessions, sendErrors    atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Requests: c.requests.Load(), Published: c.published.Load(), Duplicates: c.duplicates.Load(),
		Observations: c.observations.Load(), Notifications: c.notifications.Load(),
		Confirmable: c.confirmable.Load(), Retransmits: c.retransmits.Load(),
		DeadObservers: c.deadObservers.Load(), Resets: c.resets.Load(), Malformed: c.malformed.Load(),
		PeersEvicted: c.peersEvicted.Load(), PeersRefused: c.peersRefused.Load(),
		Dropped: c.dropped.Load(), Sessions: c.sessions.Load(), SendErrors: c.sendErrors.Load(),
	}
}
